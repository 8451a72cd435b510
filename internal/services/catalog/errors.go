package catalog

import "github.com/highload-lab/hlab/internal/services/refdata"

// errs are the catalog's errors; errs.Status maps them to HTTP.
var errs = refdata.NewErrors("catalog")

// Errors a catalog request can end with (refdata.Errors).
var (
	// ErrBadRequest: an invalid id, region or limit (400); wrapped with why.
	ErrBadRequest = errs.BadRequest
	// ErrNotFound: no customer with that id (404).
	ErrNotFound = errs.NotFound
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
