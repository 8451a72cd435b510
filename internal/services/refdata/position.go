package refdata

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pglogrepl"
)

// MinPositionHeader is the request header with which a client that has
// just written to Postgres asks to read its write: its value is the
// position read after the commit (replica.PostgresWritePosition, that is
// pg_current_wal_insert_lsn(), in its usual form such as "0/16B3748").
// The service waits until its replica shows every change committed before
// it, at most Config.PositionWait.
const MinPositionHeader = "X-Min-Position"

// DefaultPositionWait bounds a request's wait for MinPositionHeader.
const DefaultPositionWait = 5 * time.Second

// positionWaiter is a replica source that can wait for a position
// (replica.PostgresSource).
type positionWaiter interface {
	WaitFor(ctx context.Context, position pglogrepl.LSN) error
}

// AwaitPosition waits, when r carries MinPositionHeader, until the
// service's data shows every change committed before that position:
// through the replica's WaitFor, for at most Config.PositionWait. Reads
// from Postgres need no wait. A malformed position, or one asked of a
// MongoDB-fed replica (it has no WAL position), wraps errs.BadRequest
// (400); a wait that times out wraps context.DeadlineExceeded (504) and
// says where the replica is.
func (b *Backend) AwaitPosition(r *http.Request, errs Errors) error {
	v := r.Header.Get(MinPositionHeader)
	if v == "" || b.Rep == nil {
		return nil
	}
	pos, err := pglogrepl.ParseLSN(v)
	if err != nil {
		return fmt.Errorf("%w: %s must be a WAL position such as 0/16B3748 (SELECT pg_current_wal_insert_lsn() after your commit), not %.32q", errs.BadRequest, MinPositionHeader, v)
	}
	w, ok := b.Rep.src.(positionWaiter)
	if !ok {
		return fmt.Errorf("%w: %s needs a replica fed by Postgres (--source=replica); this one follows MongoDB", errs.BadRequest, MinPositionHeader)
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.Config.PositionWait)
	defer cancel()
	if err := w.WaitFor(ctx, pos); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the replica did not reach %s %s within %s (--position-wait); retry: %w", MinPositionHeader, pos, b.Config.PositionWait, err)
		}
		return fmt.Errorf("%w: waiting for %s %s: %w", errs.NotLoaded, MinPositionHeader, pos, err)
	}
	return nil
}
