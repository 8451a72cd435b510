package replica_test

// Faults made at the server, as they happen in production: a replication
// connection killed with pg_terminate_backend, a slot dropped or
// invalidated by the server (max_slot_wal_keep_size), a second replica
// on the same slot. None of them is a graceful Close.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/replica"
)

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKillMidTransaction kills the replication connection while a large
// transaction streams (after some of its rows arrived, before its
// commit), then lets the replica resume (the slot is intact) or resync
// (the slot was dropped meanwhile). What arrived of the transaction must
// not outlive the connection: resumed, it is sent again whole; resynced,
// it is in the snapshot, and its stale rows (and its TRUNCATE) must not
// be applied on top.
func TestKillMidTransaction(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dropSlot bool
	}{{"resume", false}, {"resync", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, db := setup(t, 1000)
			ctx := context.Background()
			slot := "midtx_" + tc.name
			const marker = 1_005_000 // a row 5% into the big transaction
			var fired atomic.Bool
			faulted := make(chan struct{})
			tb := replica.NewTable[int32, item]("items")
			b := replica.Bind(tb, itemKey, func(r replica.Row) (item, error) {
				it, err := decodeItem(r)
				// On the applier's goroutine, with the rest of the
				// transaction still to come: kill the connection here.
				if it.ID == marker && fired.CompareAndSwap(false, true) {
					terminateWalsender(t, db, slot)
					if tc.dropSlot {
						dropSlot(t, db, slot)
					}
					close(faulted)
				}
				return it, err
			})
			// A backoff long enough for waitUnready to see the replica down.
			src, _ := run(t, dsn, b, replica.Slot(slot), replica.Backoff(300*time.Millisecond, time.Second))
			waitReady(t, tb)
			// 100k wide rows (~30 MB of stream, more than socket buffers
			// hold), net effect: items 1..1000 renamed.
			if _, err := db.Exec(ctx, `BEGIN;
				TRUNCATE items;
				INSERT INTO items SELECT g, repeat('x', 300), 0 FROM generate_series(1000001, 1100000) g;
				DELETE FROM items WHERE id > 1000000;
				INSERT INTO items SELECT g, 'after ' || g, g FROM generate_series(1, 1000) g;
				COMMIT`); err != nil {
				t.Fatal(err)
			}
			select {
			case <-faulted:
			case <-time.After(60 * time.Second):
				t.Fatal("the big transaction's marker row never reached the replica")
			}
			// Back after the fault, a later transaction: the one a stale
			// pending transaction would be flushed with.
			waitUnready(t, tb)
			waitReady(t, tb)
			if _, err := db.Exec(ctx, `UPDATE items SET qty = qty + 1 WHERE id = 1`); err != nil {
				t.Fatal(err)
			}
			converged(t, db, tb)
			waitReady(t, tb)
			wantResyncs := int64(0)
			if tc.dropSlot {
				wantResyncs = 1
			}
			if src.Resyncs() != wantResyncs {
				t.Errorf("Resyncs = %d, want %d", src.Resyncs(), wantResyncs)
			}
		})
	}
}

// dropSlot drops slot once its walsender is gone.
func dropSlot(t *testing.T, db *pgxpool.Pool, slot string) {
	t.Helper()
	var err error
	eventually(t, 10*time.Second, "drop the slot", func() bool {
		_, err = db.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot)
		return err == nil
	})
}
