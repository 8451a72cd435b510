package loadgen

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/valyala/fasthttp"
)

// Configuration errors. Run returns them, wrapped with the offending value,
// before it sends anything; each message is one line a CLI can print as is.
var (
	// ErrInvalidURL is returned by Run when the target is not an absolute
	// http:// or https:// URL with a host.
	ErrInvalidURL = errors.New("loadgen: invalid URL")

	// ErrNoBound is returned by Run when neither Duration nor Requests was
	// given: a run must end on its own.
	ErrNoBound = errors.New("loadgen: set a duration or a request count")

	// ErrInvalidDuration is returned by Run when Duration is not positive.
	ErrInvalidDuration = errors.New("loadgen: duration must be positive")

	// ErrInvalidRequests is returned by Run when Requests is less than 1.
	ErrInvalidRequests = errors.New("loadgen: request count must be at least 1")

	// ErrInvalidRate is returned by Run when Rate is not a positive, finite
	// number of requests per second, or when Pace is given a nil Pacer.
	ErrInvalidRate = errors.New("loadgen: rate must be a positive number of requests per second")

	// ErrInvalidConnections is returned by Run when Connections is less than 1.
	ErrInvalidConnections = errors.New("loadgen: connections must be at least 1")

	// ErrInvalidTimeout is returned by Run when Timeout is not positive.
	ErrInvalidTimeout = errors.New("loadgen: timeout must be positive")

	// ErrInvalidMethod is returned by Run when Method is empty or is not a
	// valid HTTP token.
	ErrInvalidMethod = errors.New("loadgen: invalid HTTP method")

	// ErrInvalidHeader is returned by Run when a Header has an empty or
	// malformed name, or a value with a line break.
	ErrInvalidHeader = errors.New("loadgen: invalid header")
)

// Error kinds: the keys of Result.Errors. They are stable; tools and reports
// may rely on them.
const (
	// KindTimeout: no complete answer within Timeout (dialing included).
	KindTimeout = "timeout"
	// KindConnectionRefused: nothing listens on the target port.
	KindConnectionRefused = "connection_refused"
	// KindConnectionReset: the peer reset the connection (TCP RST).
	KindConnectionReset = "connection_reset"
	// KindConnectionClosed: the server closed the connection before a
	// complete answer, typically a keep-alive connection closed under us.
	KindConnectionClosed = "connection_closed"
	// KindDNS: the host name did not resolve.
	KindDNS = "dns"
	// KindNoFreeConns: the client had no free connection for the request.
	// loadgen never has more requests in flight than connections, so this
	// points at a bug rather than at the server.
	KindNoFreeConns = "no_free_conns"
	// KindOther: anything else (malformed answers, TLS failures, ...).
	KindOther = "other"
)

// errorKinds lists the kinds in the order shards count them.
var errorKinds = [...]string{
	KindTimeout,
	KindConnectionRefused,
	KindConnectionReset,
	KindConnectionClosed,
	KindDNS,
	KindNoFreeConns,
	KindOther,
}

const (
	kindTimeout = iota
	kindConnectionRefused
	kindConnectionReset
	kindConnectionClosed
	kindDNS
	kindNoFreeConns
	kindOther
	numKinds
)

// ErrorKind classifies a transport error returned while sending a request
// into one of the Kind constants. It returns "" for a nil error.
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	return errorKinds[kindOf(err)]
}

func kindOf(err error) int {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	// Timeouts first: fasthttp turns read/write deadline errors into
	// ErrTimeout, but a deadline hit while reading a body is still a wrapped
	// os.ErrDeadlineExceeded.
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout),
		errors.Is(err, os.ErrDeadlineExceeded):
		return kindTimeout
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return kindTimeout
		}
		return kindDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return kindConnectionRefused
	case errors.Is(err, syscall.ECONNRESET):
		return kindConnectionReset
	// fasthttp reports any failure on the first byte of an answer as
	// ErrConnectionClosed (it maps io.EOF to it); a broken pipe on write
	// means the same thing seen from the other side.
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed):
		return kindConnectionClosed
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return kindNoFreeConns
	case errors.As(err, &netErr) && netErr.Timeout():
		return kindTimeout
	}
	return kindOther
}
