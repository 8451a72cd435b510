package replica_test

// Faults made at the server, as they happen in production: a replication
// connection killed with pg_terminate_backend, a slot dropped or
// invalidated by the server (max_slot_wal_keep_size), a second replica
// on the same slot. None of them is a graceful Close.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// slotInfo is a slot's row in pg_replication_slots.
type slotInfo struct {
	exists    bool
	active    bool
	walStatus string
}

func slotState(t *testing.T, db *pgxpool.Pool, slot string) slotInfo {
	t.Helper()
	var s slotInfo
	var status *string
	err := db.QueryRow(context.Background(), `SELECT active, wal_status FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s.active, &status)
	if err == pgx.ErrNoRows {
		return s
	}
	if err != nil {
		t.Fatal(err)
	}
	s.exists = true
	if status != nil {
		s.walStatus = *status
	}
	return s
}

// setServer sets a server setting for the whole cluster (ALTER SYSTEM and
// a reload) until t ends.
func setServer(t *testing.T, name, value string) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, refdatatest.Postgres().DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", name, value)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(ctx, refdatatest.Postgres().DSN("postgres"))
		if err != nil {
			t.Errorf("reset %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "ALTER SYSTEM RESET "+name); err != nil {
			t.Errorf("reset %s: %v", name, err)
		}
		admin.Exec(ctx, "SELECT pg_reload_conf()")
	})
}

// TestInvalidatedSlotResyncs lets the server invalidate the replica's
// slot (max_slot_wal_keep_size exceeded: wal_status 'lost'). The slot
// still exists but can never stream again: the replica must drop it,
// resync from a new snapshot, and count and say why.
func TestInvalidatedSlotResyncs(t *testing.T) {
	dsn, db := setup(t, 300)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `CREATE TABLE filler (id serial PRIMARY KEY, pad text)`); err != nil {
		t.Fatal(err)
	}
	tb, src := start(t, dsn, replica.PostgresSlot("invalidated"))
	reg := prometheus.NewRegistry()
	if err := replica.RegisterSource(reg, "pg", src); err != nil {
		t.Fatal(err)
	}
	setServer(t, "max_slot_wal_keep_size", "1MB")
	// An open transaction that wrote holds the slot's restart_lsn back:
	// decoding must read it from its first record.
	holder, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `INSERT INTO filler (pad) VALUES ('held')`); err != nil {
		t.Fatal(err)
	}
	// WAL past the limit and a checkpoint: the server ends the walsender
	// and invalidates the slot.
	testkit.Eventually(t, 60*time.Second, "the server invalidates the slot", func() bool {
		for _, q := range []string{`INSERT INTO filler (pad) SELECT repeat('x', 100) FROM generate_series(1, 100)`, `SELECT pg_switch_wal()`, `CHECKPOINT`} {
			if _, err := db.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		return slotState(t, db, "invalidated").walStatus == "lost"
	})
	t.Log("slot invalidated: wal_status = lost")
	if err := holder.Commit(ctx); err != nil { // a new slot waits for open transactions
		t.Fatal(err)
	}
	// Changes made after the invalidation reach the replica only by a resync.
	resyncs(t, db, tb, src, `DELETE FROM items WHERE id <= 100; UPDATE items SET qty = -1 WHERE id > 200`, replica.ResyncSlotInvalidated)
	if n := testkit.MetricSum(t, reg, "replica_resyncs_total", map[string]string{"source": "pg", "reason": replica.ResyncSlotInvalidated}); n != 1 {
		t.Errorf(`replica_resyncs_total{reason="slot_invalidated"} = %v, want 1`, n)
	}
	if st := slotState(t, db, "invalidated"); !st.exists || st.walStatus == "lost" {
		t.Errorf("after the resync the slot is %+v, want a new one", st)
	}
}

// TestSlotDroppedWhenRunEnds: a replica that stops drops its slot, so a
// stopped service pins no WAL.
func TestSlotDroppedWhenRunEnds(t *testing.T) {
	dsn, db := setup(t, 50)
	tb := replica.NewTable[int32, item]("items")
	_, stop := run(t, dsn, bindItems(tb), replica.PostgresSlot("stopped"))
	waitReady(t, tb)
	if !slotState(t, db, "stopped").exists {
		t.Fatal("no slot while running")
	}
	stop()
	if st := slotState(t, db, "stopped"); st.exists {
		t.Fatalf("the slot outlived the replica: %+v", st)
	}
}

// TestLeftoverSlotIsReplaced: a slot left by a replica that died without
// dropping it (here: made by hand, inactive) cannot be resumed into an
// empty table; a new replica with the name replaces it.
func TestLeftoverSlotIsReplaced(t *testing.T) {
	dsn, db := setup(t, 50)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `SELECT pg_create_logical_replication_slot('leftover', 'pgoutput')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `DELETE FROM items WHERE id <= 10`); err != nil {
		t.Fatal(err)
	}
	tb, src := start(t, dsn, replica.PostgresSlot("leftover"))
	converged(t, db, tb)
	if src.Resyncs() != 0 {
		t.Errorf("Resyncs = %d: a first load is not a resync", src.Resyncs())
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
				// (Only signal it: a walsender that was told to end still
				// sends its last words, which this goroutine must read.)
				if it.ID == marker && fired.CompareAndSwap(false, true) {
					if _, err := db.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1`, slot); err != nil {
						t.Errorf("kill the replication connection: %v", err)
					}
					close(faulted)
				}
				return it, err
			})
			// A backoff long enough for waitUnready to see the replica
			// down, and for the slot to be dropped before it reconnects.
			src, _ := run(t, dsn, b, replica.PostgresSlot(slot), replica.PostgresBackoff(2*time.Second, 2*time.Second))
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
			if tc.dropSlot {
				dropSlot(t, db, slot)
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
	testkit.Eventually(t, 10*time.Second, "drop the slot", func() bool {
		_, err = db.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot)
		return err == nil
	})
}

// TestSlotTakenOverDuringReconnect: a second replica on the first one's
// slot name takes the slot while the first is reconnecting (its
// connection was killed). The first must not resume from the other's
// slot (the server would skip it ahead to that slot's position and lose
// the transactions in between while it reports Ready): it must say the
// slot is in use, and once the other has stopped, resync and converge.
func TestSlotTakenOverDuringReconnect(t *testing.T) {
	dsn, db := setup(t, 300)
	ctx := context.Background()
	// A long backoff holds the first replica off while the second starts.
	const holdOff = 8 * time.Second
	tb1 := replica.NewTable[int32, item]("items")
	src1, _ := run(t, dsn, bindItems(tb1), replica.PostgresSlot("shared"), replica.PostgresBackoff(holdOff, holdOff))
	waitReady(t, tb1)
	terminateWalsender(t, db, "shared")
	killed := time.Now()
	waitUnready(t, tb1)
	// Transactions the first replica's slot had not yet sent: they are
	// in the second one's snapshot, and not in its slot.
	if _, err := db.Exec(ctx, `DELETE FROM items WHERE id <= 50; UPDATE items SET name = 'while away' WHERE id > 250`); err != nil {
		t.Fatal(err)
	}
	tb2 := replica.NewTable[int32, item]("items")
	_, stop2 := run(t, dsn, bindItems(tb2), replica.PostgresSlot("shared"))
	waitReady(t, tb2)
	if time.Since(killed) > holdOff {
		t.Fatalf("the second replica took %s to start, longer than the first one's backoff", time.Since(killed))
	}
	// The first one comes back to a slot another replica holds.
	testkit.Eventually(t, 3*holdOff, "the first replica says its slot is in use", func() bool {
		return !tb1.Ready() && errors.Is(tb1.Err(), replica.ErrSlotInUse)
	})
	t.Logf("first replica: %v", tb1.Err())
	// The second one stops and drops its slot: the first makes its own.
	stop2()
	converged(t, db, tb1)
	waitReady(t, tb1)
	if n := src1.ResyncsByReason(); n[replica.ResyncSlotDropped] != 1 {
		t.Errorf("first replica's resyncs %v, want one %s", n, replica.ResyncSlotDropped)
	}
}

// TestSecondReplicaOnSameSlotFails: a second replica started on a slot
// that a running one streams from fails at once with an error that says
// to give each its own slot; the first is undisturbed.
func TestSecondReplicaOnSameSlotFails(t *testing.T) {
	dsn, db := setup(t, 100)
	tb1, _ := start(t, dsn, replica.PostgresSlot("twice"))
	tb2 := replica.NewTable[int32, item]("items")
	run(t, dsn, bindItems(tb2), replica.PostgresSlot("twice"))
	testkit.Eventually(t, 3*time.Second, "the second replica reports the slot in use", func() bool {
		return errors.Is(tb2.Err(), replica.ErrSlotInUse)
	})
	t.Logf("second replica: %v", tb2.Err())
	if tb2.Ready() {
		t.Fatal("the second replica is ready")
	}
	if _, err := db.Exec(context.Background(), `UPDATE items SET qty = 7 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	converged(t, db, tb1)
	waitReady(t, tb1)
}

// TestForeignSlotIsLeftAlone: a slot of the replica's name that is not a
// logical slot on its database (a standby's physical slot, another
// database's replica) is someone else's: the replica reports
// ErrSlotInUse and neither drops nor uses it.
func TestForeignSlotIsLeftAlone(t *testing.T) {
	dsn, db := setup(t, 10)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `SELECT pg_create_physical_replication_slot('standby')`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(ctx, `SELECT pg_drop_replication_slot('standby')`) })
	tb := replica.NewTable[int32, item]("items")
	_, stop := run(t, dsn, bindItems(tb), replica.PostgresSlot("standby"))
	testkit.Eventually(t, 10*time.Second, "the replica reports the slot in use", func() bool {
		return errors.Is(tb.Err(), replica.ErrSlotInUse)
	})
	t.Logf("replica: %v", tb.Err())
	stop()
	var kind string
	if err := db.QueryRow(ctx, `SELECT slot_type FROM pg_replication_slots WHERE slot_name = 'standby'`).Scan(&kind); err != nil || kind != "physical" {
		t.Fatalf("the standby's slot is %q (%v), want it untouched", kind, err)
	}
}

// TestCaughtUpAfterFault is how an experiment tells that a replica has
// converged after a fault: it reads the server's position after the
// fault's last write, and waits until the source's AppliedLSN (or
// replica_applied_lsn) reaches it with every table Ready. Writes to
// tables the replica does not follow move the position too.
func TestCaughtUpAfterFault(t *testing.T) {
	dsn, db := setup(t, 200)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `CREATE TABLE other (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	tb, src := start(t, dsn, replica.PostgresSlot("caught_up"))
	reg := prometheus.NewRegistry()
	if err := replica.RegisterSource(reg, "pg", src); err != nil {
		t.Fatal(err)
	}
	position := func() uint64 {
		var lsn string
		// The insert position: this Postgres runs synchronous_commit off,
		// so the written one (pg_current_wal_lsn) may stop short of the
		// last commit.
		if err := db.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		p, err := pglogrepl.ParseLSN(lsn)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(p)
	}
	caughtUp := func(target uint64) func() bool {
		return func() bool {
			return tb.Ready() && uint64(src.AppliedLSN()) >= target &&
				testkit.MetricSum(t, reg, "replica_applied_lsn", map[string]string{"source": "pg"}) >= float64(target)
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO other SELECT generate_series(1, 100)`); err != nil {
		t.Fatal(err)
	}
	target := position()
	testkit.Eventually(t, 15*time.Second, "caught up with writes to a table it does not follow", caughtUp(target))

	// The fault: the connection killed while the table changes.
	terminateWalsender(t, db, "caught_up")
	if _, err := db.Exec(ctx, `UPDATE items SET qty = qty + 1000; INSERT INTO other SELECT generate_series(101, 200)`); err != nil {
		t.Fatal(err)
	}
	target = position()
	testkit.Eventually(t, 30*time.Second, "caught up after the fault", caughtUp(target))
	// Caught up means the table holds everything before the target.
	got, _ := tb.Get(1)
	if got.Qty != 1001 {
		t.Fatalf("caught up, yet item 1 is %+v", got)
	}
	t.Logf("caught up at %s (target %s)", src.AppliedLSN(), pglogrepl.LSN(target))
}
