package backend

import "errors"

// Errors returned by New and SetFault when a Config is out of bounds; the
// fault endpoint answers them as 400 Bad Request.
var (
	// ErrBadMode is returned for a Mode other than normal, trickle or blackhole.
	ErrBadMode = errors.New("backend: mode must be normal, trickle or blackhole")
	// ErrBadConfig is returned, wrapped with the field and its bounds, for a
	// delay, fraction or size out of range.
	ErrBadConfig = errors.New("backend: setting out of range")
)

// ErrNoConnectHole is returned by ListenConnectHole when this machine's
// kernel completes connects to a listener whose accept queue is full, so
// no connect black hole can be made on it.
var ErrNoConnectHole = errors.New("backend: no connect black hole on this machine")
