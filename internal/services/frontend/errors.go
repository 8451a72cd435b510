package frontend

import (
	"errors"
	"fmt"
)

// Errors of the outward call to the back. The handler answers each with a
// 5xx status and its message, and counts it by kind
// (frontend_requests_total{outcome=KIND}); Kind names the kind of any
// error the call returns.
var (
	// ErrConnectTimeout: the TCP connection to the back was not set up
	// within Config.ConnectTimeout (a black-holed address). 504.
	ErrConnectTimeout = errors.New("frontend: connecting to the backend timed out")
	// ErrHeaderTimeout: the back's response headers did not arrive within
	// Config.HeaderTimeout of sending the request. 504.
	ErrHeaderTimeout = errors.New("frontend: the backend's response headers did not arrive in time")
	// ErrBodyTimeout: the back's response body was not read to the end
	// within Config.BodyTimeout of its headers (a slow trickle). 504.
	ErrBodyTimeout = errors.New("frontend: the backend's response body did not arrive in time")
	// ErrDeadline: the whole call, hedges included, overran
	// Config.Timeout. 504.
	ErrDeadline = errors.New("frontend: the backend did not answer within the deadline")
	// ErrUnreachable: the back refused or reset the connection. 502.
	ErrUnreachable = errors.New("frontend: the backend is unreachable")
	// ErrBodyTooLarge: the back's answer exceeded Config.MaxBodyBytes. 502.
	ErrBodyTooLarge = errors.New("frontend: the backend's answer is too large")
	// ErrBreakerOpen: the circuit breaker is open after too many failures;
	// the back is not called until it half-opens. 503 with Retry-After.
	ErrBreakerOpen = errors.New("frontend: circuit breaker open: the backend has been failing")
	// ErrShed: the adaptive concurrency limit is reached; the request is
	// shed without calling the back. 503.
	ErrShed = errors.New("frontend: overloaded: the adaptive concurrency limit to the backend is reached")
	// ErrTooManyInflight: Config.MaxInflight requests are already being
	// served. 503.
	ErrTooManyInflight = errors.New("frontend: too many requests in flight")
	// ErrBackend: any other failure of the call to the back (a broken
	// connection, a malformed answer). 502.
	ErrBackend = errors.New("frontend: the call to the backend failed")
	// ErrClientGone: the client went away before the answer; nothing is
	// answered, but it is counted.
	ErrClientGone = errors.New("frontend: the client went away")
)

// StatusError is returned when the back answers with a status other than
// 200. The front answers 502 with the back's status in the message.
type StatusError struct {
	Code int    // the back's status code
	Body string // the start of the back's answer, for the message
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("frontend: the backend answered %d", e.Code)
	}
	return fmt.Sprintf("frontend: the backend answered %d: %s", e.Code, e.Body)
}
