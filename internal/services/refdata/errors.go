package refdata

import "errors"

var (
	// ErrLoading is returned by Replica.Ready until the first snapshot is
	// loaded.
	ErrLoading = errors.New("refdata: the replica is loading its first snapshot")
	// ErrNoDSN is returned by OpenPool and NewReplica without a DSN.
	ErrNoDSN = errors.New("refdata: no Postgres DSN (pass --dsn postgres://user@host:port/db)")
)
