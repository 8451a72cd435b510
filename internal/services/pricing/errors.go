package pricing

import (
	"context"
	"errors"
	"net/http"
)

// Errors a price request can end with; statusOf maps them to HTTP.
var (
	// ErrBadRequest: the query string is invalid (400); wrapped with why.
	ErrBadRequest = errors.New("pricing: bad request")
	// ErrNotFound: the product or city does not exist (404).
	ErrNotFound = errors.New("pricing: not found")
	// ErrStale: a reference row the product or city points to is not in
	// the replica yet (replication lag) (503, retry).
	ErrStale = errors.New("pricing: reference data not in the replica yet")
	// ErrNotLoaded: the replica has not loaded its first snapshot (503).
	ErrNotLoaded = errors.New("pricing: the replica is still loading")
	// ErrDatabase: Postgres failed or timed out (503, or 504 on the deadline).
	ErrDatabase = errors.New("pricing: database")
	// ErrConfig is returned by New for an invalid Config.
	ErrConfig = errors.New("pricing: bad config")
)

// statusOf is the one place errors become status codes.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, ErrStale), errors.Is(err, ErrNotLoaded), errors.Is(err, ErrDatabase):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
