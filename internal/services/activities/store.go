package activities

import (
	"context"

	"github.com/google/uuid"
)

// Store is where activities are kept: Postgres (pgStore) or Cassandra
// (cassandraStore). Its methods are safe for concurrent use; an error
// that is the database's (down, slow, refusing) wraps ErrUnavailable.
type Store interface {
	// Insert writes one activity and returns once the database
	// acknowledged it (with its durability settings).
	Insert(ctx context.Context, a Activity) error
	// InsertBatch writes rows at once and sets errs[i] (len(errs) ==
	// len(rows)) to rows[i]'s outcome; nil means the database
	// acknowledged that row.
	InsertBatch(ctx context.Context, rows []Activity, errs []error)
	// Recent returns up to limit activities of user, newest first.
	Recent(ctx context.Context, user uuid.UUID, limit int) ([]Activity, error)
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Kind names the store and its settings for logs: "postgres", "cassandra (QUORUM)".
	Kind() string
	Close()
}
