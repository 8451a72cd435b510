package replica_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/replica"
)

// TestWaitForReadsOwnWrites writes a row, reads the write position and
// waits for it: the replica then has the write, every time. The status
// interval is a minute, so no wait can be served by a periodic status.
func TestWaitForReadsOwnWrites(t *testing.T) {
	dsn, db := setup(t, 100)
	tb, src := start(t, dsn, replica.PostgresStatusInterval(time.Minute))
	ctx := context.Background()
	for i := range 300 {
		id := int32(1 + i%100)
		pos := writeFlushed(t, db, `UPDATE items SET qty = $2 WHERE id = $1`, id, 1000+i)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := src.WaitFor(wctx, pos)
		cancel()
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if got, _ := tb.Get(id); got.Qty != int32(1000+i) {
			t.Fatalf("write %d: after WaitFor(%s) the replica has qty %d, want %d", i, pos, got.Qty, 1000+i)
		}
	}
}

// TestWaitForConcurrentWriters: eight clients write and read their own
// rows at once; their requests for a keepalive are coalesced, and every
// one reads its write.
func TestWaitForConcurrentWriters(t *testing.T) {
	dsn, db := setup(t, 100)
	tb, src := start(t, dsn, replica.PostgresStatusInterval(time.Minute))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				id := int32(1 + w*10 + i%10)
				pos := writeFlushed(t, db, `UPDATE items SET qty = $2 WHERE id = $1`, id, 2000+i)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := src.WaitFor(ctx, pos)
				cancel()
				if err != nil {
					t.Errorf("writer %d, write %d: %v", w, i, err)
					return
				}
				if got, _ := tb.Get(id); got.Qty != int32(2000+i) {
					t.Errorf("writer %d, write %d: after WaitFor(%s) qty %d, want %d", w, i, pos, got.Qty, 2000+i)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestWaitForIdleTables waits for a position that no change to the
// source's tables reaches (a write to a table it does not follow): the
// server's keepalive carries the source there, without waiting for the
// status interval of a minute.
func TestWaitForIdleTables(t *testing.T) {
	dsn, db := setup(t, 10)
	exec(t, db, `CREATE TABLE other (id int PRIMARY KEY)`)
	_, src := start(t, dsn, replica.PostgresStatusInterval(time.Minute))
	ctx := context.Background()
	for i := range 20 {
		pos := writeFlushed(t, db, `INSERT INTO other VALUES ($1)`, i)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := src.WaitFor(wctx, pos)
		cancel()
		if err != nil {
			t.Fatalf("write %d to another table: %v", i, err)
		}
	}
}

// TestWaitForEnds: a position the server has not reached yet ends with
// ctx, saying where the replica is; once Run has returned, at once.
func TestWaitForEnds(t *testing.T) {
	dsn, _ := setup(t, 1)
	tb := replica.NewTable[int32, item]("items")
	src, stop := run(t, dsn, bindItems(tb))
	waitReady(t, tb)
	future := src.AppliedLSN() + 1<<40
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := src.WaitFor(ctx, future)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), future.String()) {
		t.Fatalf("WaitFor a future position: %v, want a deadline naming %s", err, future)
	}
	stop()
	if err := src.WaitFor(context.Background(), future); !errors.Is(err, replica.ErrSourceStopped) {
		t.Fatalf("WaitFor after Run returned: %v, want ErrSourceStopped", err)
	}
	if err := src.WaitFor(context.Background(), pglogrepl.LSN(1)); err != nil {
		t.Fatalf("WaitFor a position reached before Run returned: %v, want nil (its changes are in the tables)", err)
	}
}

// writeFlushed runs sql in a transaction committed with
// synchronous_commit on, as a write-then-read client commits, and
// returns the write position after it. (The tests' server runs with it
// off: a commit would reach the stream only once the WAL writer flushed
// it, up to 3 x wal_writer_delay later.)
func writeFlushed(t *testing.T, db *pgxpool.Pool, sql string, args ...any) pglogrepl.LSN {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	if err != nil {
		t.Errorf("%s: %v", sql, err)
		return 0
	}
	pos, err := replica.PostgresWritePosition(ctx, db)
	if err != nil {
		t.Error(err)
	}
	return pos
}
