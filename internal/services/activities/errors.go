package activities

import (
	"errors"
	"net/http"
)

// Errors a request can end with; statusOf maps them to HTTP.
var (
	// ErrBadRequest: an invalid body or query (400), wrapped with why.
	ErrBadRequest = errors.New("activities: bad request")
	// ErrTooLarge: a body over Config.MaxBodyBytes (413).
	ErrTooLarge = errors.New("activities: body too large")
	// ErrSlowBody: a body that did not arrive within the server's read
	// timeout (408); the server closes the connection.
	ErrSlowBody = errors.New("activities: body too slow")
	// ErrMediaType: a body that says it is not JSON (415).
	ErrMediaType = errors.New("activities: unsupported media type")
	// ErrUnavailable: the database failed, did not answer within
	// Config.Timeout, or the batcher's queue is full (503). The write may
	// or may not have happened; a retry with the same body stores a new
	// activity.
	ErrUnavailable = errors.New("activities: database unavailable")
	// ErrNoHistory: the table cannot answer a user's history (501): the
	// report's Cassandra table, keyed by activity alone.
	ErrNoHistory = errors.New("activities: no history read on this table")
	// ErrConfig is returned by New for an invalid Config.
	ErrConfig = errors.New("activities: bad config")
	// ErrClosed is returned by Batcher.Add after Batcher.Close.
	ErrClosed = errors.New("activities: batcher closed")
)

// statusOf is the one place errors become status codes. A deadline that
// passed is the database's fault here (the service bounds its calls with
// Config.Timeout), so it is 503 like any other database failure.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrSlowBody):
		return http.StatusRequestTimeout
	case errors.Is(err, ErrMediaType):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, ErrNoHistory):
		return http.StatusNotImplemented
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
