package catalog

import (
	"context"
	"errors"
	"net/http"
)

// Errors a catalog request can end with; statusOf maps them to HTTP.
var (
	// ErrBadRequest: an invalid id, region or limit (400); wrapped with why.
	ErrBadRequest = errors.New("catalog: bad request")
	// ErrNotFound: no customer with that id (404).
	ErrNotFound = errors.New("catalog: not found")
	// ErrNotLoaded: the replica has not loaded its first snapshot (503).
	ErrNotLoaded = errors.New("catalog: the replica is still loading")
	// ErrDatabase: Postgres failed or timed out (503, or 504 on the deadline).
	ErrDatabase = errors.New("catalog: database")
	// ErrConfig is returned by New for an invalid Config.
	ErrConfig = errors.New("catalog: bad config")
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
	case errors.Is(err, ErrNotLoaded), errors.Is(err, ErrDatabase):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
