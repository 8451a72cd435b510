package refdata

import (
	"context"
	"errors"
	"net/http"
)

var (
	// ErrLoading is returned by Replica.Ready until the first snapshot is
	// loaded.
	ErrLoading = errors.New("refdata: the replica is loading its first snapshot")
	// ErrNoDSN is returned by OpenPool and NewReplica without a DSN.
	ErrNoDSN = errors.New("refdata: no Postgres DSN (pass --dsn postgres://user@host:port/db)")
	// ErrNoMongoURI is returned by NewMongoReplica (and so by a service
	// with --source=mongo) without a MongoDB URI.
	ErrNoMongoURI = errors.New("refdata: no MongoDB URI (pass --mongo-uri mongodb://host:port/ with --source=mongo)")
)

// Errors are the errors a reference-data service's requests end with,
// each message starting with the service's name ("catalog: not found").
// Catalog and pricing fail the same ways, so they share these and the one
// mapping to HTTP (Status) rather than each keeping a copy.
type Errors struct {
	// BadRequest: an invalid id or query (400); wrapped with why.
	BadRequest error
	// NotFound: no such row (404).
	NotFound error
	// Stale: a reference row another row points to is not in the replica
	// yet (replication lag) (503, retry).
	Stale error
	// NotLoaded: the replica has not loaded its first snapshot (503).
	NotLoaded error
	// TooOld: the replica has not confirmed it is current for longer
	// than Config.MaxStaleness (503 with Retry-After); it wraps the
	// *replica.StaleError, whose message names the age.
	TooOld error
	// Database: Postgres failed or timed out (503, or 504 on the deadline).
	Database error
	// Config: the service was given an invalid Config (OpenBackend).
	Config error
}

// NewErrors returns the errors of the service named service.
func NewErrors(service string) Errors {
	return Errors{
		BadRequest: errors.New(service + ": bad request"),
		NotFound:   errors.New(service + ": not found"),
		Stale:      errors.New(service + ": reference data not in the replica yet"),
		NotLoaded:  errors.New(service + ": the replica is still loading"),
		TooOld:     errors.New(service + ": the replica's data is too old to answer from; try again, or another instance"),
		Database:   errors.New(service + ": database"),
		Config:     errors.New(service + ": bad config"),
	}
}

// Status is the one place the errors become status codes: 400, 404, 504
// on a deadline, 503 for the other errors above, 500 for anything else.
func (e Errors) Status(err error) int {
	switch {
	case errors.Is(err, e.BadRequest):
		return http.StatusBadRequest
	case errors.Is(err, e.NotFound):
		return http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, e.Stale), errors.Is(err, e.NotLoaded), errors.Is(err, e.TooOld), errors.Is(err, e.Database):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Fail answers err as plain text with its status, and, for a replica
// too old to answer from, a Retry-After of a second: the replica
// confirms it is current about that often once its stream is back.
func (e Errors) Fail(w http.ResponseWriter, err error) {
	if errors.Is(err, e.TooOld) {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, err.Error(), e.Status(err))
}
