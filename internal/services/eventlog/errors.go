package eventlog

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors of POST /events; statusOf maps them to HTTP.
var (
	// ErrBadEvent: an empty or unreadable body (400).
	ErrBadEvent = errors.New("eventlog: bad event")
	// ErrEventTooLarge: a body over MaxEventBytes (413).
	ErrEventTooLarge = errors.New("eventlog: reading the event: too large")
	// ErrSlowEvent: a body that did not arrive within the server's read
	// timeout (408); the server closes the connection.
	ErrSlowEvent = errors.New("eventlog: reading the event: it did not arrive within the server's read timeout")
)

// statusOf is the one place POST /events' errors become status codes.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrEventTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrSlowEvent):
		return http.StatusRequestTimeout
	case errors.Is(err, ErrBadEvent):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

var (
	// ErrNoBrokers is returned by NewConsumer and Serve (with Consume)
	// when no Kafka brokers are given.
	ErrNoBrokers = errors.New("eventlog: no kafka brokers")
	// ErrConsumerClosed is returned by Consumer.Run when the consumer was
	// closed under it.
	ErrConsumerClosed = errors.New("eventlog: consumer closed")
)

// ErrorKind names the kind of an error talking to Kafka, for metrics
// labels: "timeout", "connection_refused", "network", "client_closed", a
// Kafka error code in lower case ("not_coordinator",
// "unknown_topic_or_partition", ...), or "other". The app uses it too.
func ErrorKind(err error) string {
	var ke *kerr.Error
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return "timeout"
	case errors.Is(err, kgo.ErrClientClosed):
		return "client_closed"
	case errors.As(err, &ke):
		return strings.ToLower(ke.Message)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &ne), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return "network"
	}
	return "other"
}
