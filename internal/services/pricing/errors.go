package pricing

import "github.com/highload-lab/hlab/internal/services/refdata"

// errs are the pricing service's errors; errs.Status maps them to HTTP.
var errs = refdata.NewErrors("pricing")

// Errors a price request can end with (refdata.Errors).
var (
	// ErrBadRequest: the query string is invalid (400); wrapped with why.
	ErrBadRequest = errs.BadRequest
	// ErrNotFound: the product or city does not exist (404).
	ErrNotFound = errs.NotFound
	// ErrStale: a reference row the product or city points to is not in
	// the replica yet (replication lag) (503, retry).
	ErrStale = errs.Stale
	// ErrNotLoaded: the replica has not loaded its first snapshot (503).
	ErrNotLoaded = errs.NotLoaded
	// ErrTooOld: the replica has not confirmed it is current for longer
	// than --max-staleness (503, Retry-After); the message names the age.
	ErrTooOld = errs.TooOld
	// ErrDatabase: Postgres failed or timed out (503, or 504 on the deadline).
	ErrDatabase = errs.Database
	// ErrConfig is returned by New for an invalid Config.
	ErrConfig = errs.Config
)
