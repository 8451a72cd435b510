package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/services/eventlog"
)

// Errors of recording an event. The handler answers each with 503, the
// message, the kind (Kind) in the X-Failure header and Retry-After: 1 (or,
// with Config.Drop, answers 200 and counts the event as dropped), and
// counts it by kind in app_event_errors_total{kind}.
var (
	// ErrBufferFull: async mode, Config.Buffer events are accepted and
	// not yet stored by Kafka; the event is not buffered.
	ErrBufferFull = errors.New("app: the event buffer is full: Kafka is not keeping up")
	// ErrKafkaUnreachable: async mode, Kafka has stored nothing for
	// Config.KafkaDeadline while events wait; or async and kafka-ack
	// modes, the topic was not found yet at start. The event is not
	// produced.
	ErrKafkaUnreachable = errors.New("app: kafka is unreachable: events cannot be recorded")
	// ErrTimeout: sync, databus or kafka-ack mode, the event log, the
	// gateway or Kafka did not answer within Config.Timeout. In
	// kafka-ack mode the event may still be stored later.
	ErrTimeout = errors.New("app: recording the event timed out")
	// ErrUnreachable: sync or databus mode, the event log or the gateway
	// refused or dropped the connection.
	ErrUnreachable = errors.New("app: the event's destination is unreachable")
	// ErrRejected: the event log answered a status other than 200, the
	// gateway refused the publish, or Kafka refused the event
	// (kafka-ack).
	ErrRejected = errors.New("app: the event was refused")
	// ErrTooManyInflight: Config.MaxInflight requests are being served;
	// the request is refused before any work.
	ErrTooManyInflight = errors.New("app: too many requests in flight")
	// ErrClientGone: the client went away before the event was recorded.
	ErrClientGone = errors.New("app: the client went away")
)

// StatusError is the event log's answer when it is not 200; it wraps
// ErrRejected.
type StatusError struct {
	Code int
	Body string // the start of the answer
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("app: the event log answered %d: %s", e.Code, e.Body)
}

func (e *StatusError) Unwrap() error { return ErrRejected }

// Kind names an error of recording an event, for the X-Failure header and
// metric labels: "buffer_full", "kafka_unreachable", "timeout",
// "unreachable", "status_NNN" (the event log's status), "rejected_CODE"
// (the gateway's gRPC code, or Kafka's error code in kafka-ack mode),
// "too_many_inflight", "client_gone", or "other".
func Kind(err error) string {
	var (
		se *StatusError
		ge *GatewayError
		ke *KafkaError
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrBufferFull):
		return "buffer_full"
	case errors.Is(err, ErrKafkaUnreachable):
		return "kafka_unreachable"
	case errors.Is(err, ErrTooManyInflight):
		return "too_many_inflight"
	case errors.Is(err, ErrClientGone):
		return "client_gone"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrUnreachable):
		return "unreachable"
	case errors.As(err, &se):
		return fmt.Sprintf("status_%d", se.Code)
	case errors.As(err, &ge):
		return "rejected_" + strings.ToLower(ge.Code.String())
	case errors.As(err, &ke):
		return "rejected_" + eventlog.ErrorKind(ke.Err)
	case errors.Is(err, ErrRejected):
		return "rejected"
	}
	return "other"
}

// deliveryKind names why Kafka failed an accepted event, for
// app_event_errors_total{kind="delivery_..."}.
func deliveryKind(err error) string { return "delivery_" + eventlog.ErrorKind(err) }

// GatewayError is a publish the databus gateway refused, with its gRPC
// code; it wraps ErrRejected and the gateway's error.
type GatewayError struct {
	Code codes.Code
	Err  error
}

func (e *GatewayError) Error() string {
	return fmt.Sprintf("app: the databus gateway refused the event (%s): %v", e.Code, e.Err)
}

func (e *GatewayError) Unwrap() []error { return []error{ErrRejected, e.Err} }

// gatewayError maps a failed publish through the gateway to the errors
// above.
func gatewayError(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %v", ErrClientGone, err)
	}
	code := status.Code(err)
	var pe *databus.PublishError
	if errors.As(err, &pe) && len(pe.Records) > 0 {
		code = pe.Records[0].Code
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), code == codes.DeadlineExceeded:
		return fmt.Errorf("%w: the databus gateway: %v", ErrTimeout, err)
	case code == codes.Unavailable:
		return fmt.Errorf("%w: the databus gateway: %v", ErrUnreachable, err)
	}
	return &GatewayError{Code: code, Err: err}
}

// KafkaError is an event Kafka refused in kafka-ack mode, with Kafka's
// error (a *kerr.Error: MESSAGE_TOO_LARGE, or UNKNOWN_TOPIC_OR_PARTITION
// once the topic is gone); it wraps ErrRejected and that error.
type KafkaError struct {
	Err error
}

func (e *KafkaError) Error() string {
	return fmt.Sprintf("app: kafka refused the event: %v", e.Err)
}

func (e *KafkaError) Unwrap() []error { return []error{ErrRejected, e.Err} }

// produceError maps franz-go's answer to a produce in kafka-ack mode to
// the errors above (nil stays nil: Kafka stored the event).
func produceError(err error, timeout time.Duration) error {
	var ke *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return fmt.Errorf("%w: kafka did not acknowledge the event within %v: %v", ErrTimeout, timeout, err)
	case errors.As(err, &ke):
		return &KafkaError{Err: err}
	}
	return fmt.Errorf("app: producing the event to kafka: %w", err)
}
