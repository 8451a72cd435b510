package replica_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// loads records when each source's snapshot loads began and ended, as
// its decode function sees them: the first row's decode holds the load
// until the test opens that source's gate, so the test can see what the
// others do while one is loading.
type loads struct {
	mu    sync.Mutex
	gates map[string]chan struct{}
	open  map[string]func()
	spans map[string]*[2]time.Time // first decode, last decode
}

func newLoads(sources ...string) *loads {
	l := &loads{gates: map[string]chan struct{}{}, open: map[string]func(){}, spans: map[string]*[2]time.Time{}}
	for _, s := range sources {
		gate := make(chan struct{})
		l.gates[s], l.open[s] = gate, sync.OnceFunc(func() { close(gate) })
	}
	return l
}

// bind binds tb for source, its decode recording into l.
func (l *loads) bind(source string, tb *replica.Table[int32, item]) replica.Binding {
	return replica.Bind(tb, itemKey, func(r replica.Row) (item, error) {
		l.mu.Lock()
		span, began := l.spans[source]
		if !began {
			span = &[2]time.Time{time.Now()}
			l.spans[source] = span
		}
		l.mu.Unlock()
		if !began {
			<-l.gates[source]
		}
		l.mu.Lock()
		span[1] = time.Now()
		l.mu.Unlock()
		return decodeItem(r)
	})
}

// release lets source's load go on.
func (l *loads) release(source string) { l.open[source]() }

// began is the sources whose load has begun.
func (l *loads) began() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for s := range l.spans {
		out = append(out, s)
	}
	return out
}

func (l *loads) span(source string) [2]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.spans[source]
}

// twoReplicas starts replicas "a" and "b" of one publication on a
// database of a few rows, their loads recorded by l.
func twoReplicas(t *testing.T, l *loads, opts ...replica.PostgresOption) (db *pgxpool.Pool, tables map[string]*replica.Table[int32, item], srcs map[string]*replica.PostgresSource) {
	t.Helper()
	dsn, db := setup(t, 3)
	// Made beforehand, so the two do not race to make it.
	exec(t, db, `CREATE PUBLICATION hlab_replica FOR TABLE items`)
	tables, srcs = map[string]*replica.Table[int32, item]{}, map[string]*replica.PostgresSource{}
	for _, name := range []string{"a", "b"} {
		tables[name] = replica.NewTable[int32, item]("items")
		srcs[name], _ = run(t, dsn, l.bind(name, tables[name]), append([]replica.PostgresOption{replica.PostgresSlot(name)}, opts...)...)
		// Before the source is stopped (cleanups run last first), so a
		// test that fails does not leave it stuck in a load.
		t.Cleanup(func() { l.release(name) })
	}
	return db, tables, srcs
}

func other(name string) string {
	if name == "a" {
		return "b"
	}
	return "a"
}

func TestSnapshotLimitSerializesLoads(t *testing.T) {
	l := newLoads("a", "b")
	db, tables, srcs := twoReplicas(t, l, replica.PostgresSnapshotLimit(1))
	var queued string
	testkit.Eventually(t, 30*time.Second, "one replica loads and the other waits for its turn", func() bool {
		for name, tb := range tables {
			if errors.Is(tb.Err(), replica.ErrSnapshotQueued) && len(l.began()) == 1 && l.began()[0] == other(name) {
				queued = name
				return true
			}
		}
		return false
	})
	t.Logf("%s waits: %v", queued, tables[queued].Err())
	l.release("a")
	l.release("b")
	for _, tb := range tables {
		waitReady(t, tb)
		converged(t, db, tb)
	}
	first, second := l.span(other(queued)), l.span(queued)
	if !first[1].Before(second[0]) {
		t.Fatalf("loads overlap with a limit of 1: %s loaded %v..%v, %s %v..%v",
			other(queued), first[0], first[1], queued, second[0], second[1])
	}
	reg := prometheus.NewRegistry()
	if err := replica.RegisterSource(reg, "queued", srcs[queued]); err != nil {
		t.Fatal(err)
	}
	if got := testkit.MetricSum(t, reg, "replica_snapshot_wait_seconds_total", nil); got <= 0 {
		t.Errorf("replica_snapshot_wait_seconds_total is %v, but the source waited for its turn", got)
	}
	if got := testkit.MetricSum(t, reg, "replica_snapshot_loading", nil); got != 0 {
		t.Errorf("replica_snapshot_loading is %v after the load", got)
	}
}

func TestSnapshotTurnFreedWhenHolderDies(t *testing.T) {
	l := newLoads("a", "b")
	db, tables, _ := twoReplicas(t, l, replica.PostgresSnapshotLimit(1))
	testkit.Eventually(t, 30*time.Second, "one replica loads and the other waits for its turn", func() bool {
		return len(l.began()) == 1 && errors.Is(tables[other(l.began()[0])].Err(), replica.ErrSnapshotQueued)
	})
	holder := l.began()[0]
	waiter := other(holder)
	// The holder's session is cut while it loads, as when its process
	// dies: the server ends the session and its advisory locks with it.
	var pid int32
	if err := db.QueryRow(context.Background(), `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid); err != nil {
		t.Fatalf("the holder's turn: %v", err)
	}
	exec(t, db, `SELECT pg_terminate_backend($1)`, pid)
	l.release(waiter)
	// The waiter loads while the holder is still stuck in its load.
	waitReady(t, tables[waiter])
	converged(t, db, tables[waiter])
	l.release(holder)
	waitReady(t, tables[holder])
	converged(t, db, tables[holder])
}

func TestSnapshotLimitOff(t *testing.T) {
	l := newLoads("a", "b")
	db, tables, _ := twoReplicas(t, l, replica.PostgresSnapshotLimit(0))
	testkit.Eventually(t, 30*time.Second, "both replicas load at once", func() bool { return len(l.began()) == 2 })
	l.release("a")
	l.release("b")
	for _, tb := range tables {
		waitReady(t, tb)
		converged(t, db, tb)
	}
}

func TestSnapshotLimitValidated(t *testing.T) {
	tb := replica.NewTable[int32, item]("items")
	_, err := replica.NewPostgresSource("postgres://localhost/db", []replica.Binding{bindItems(tb)}, replica.PostgresSnapshotLimit(1_000_000))
	if err == nil {
		t.Fatal("a limit of a million turns was accepted")
	}
}

// TestResyncWaitsForTurn: a replica that must load again (its slot was
// dropped) takes a turn for it like a starting one, and waits while
// another replica holds the only one.
func TestResyncWaitsForTurn(t *testing.T) {
	l := newLoads("resyncing", "holder")
	dsn, db := setup(t, 3)
	exec(t, db, `CREATE PUBLICATION hlab_replica FOR TABLE items`)
	l.release("resyncing")
	resyncing := replica.NewTable[int32, item]("items")
	src, _ := run(t, dsn, l.bind("resyncing", resyncing), replica.PostgresSlot("resyncing"), replica.PostgresSnapshotLimit(1))
	waitReady(t, resyncing)
	holder := replica.NewTable[int32, item]("items")
	run(t, dsn, l.bind("holder", holder), replica.PostgresSlot("holder"), replica.PostgresSnapshotLimit(1))
	t.Cleanup(func() { l.release("holder") })
	testkit.Eventually(t, 30*time.Second, "a second replica loads, holding the only turn", func() bool { return len(l.began()) == 2 })
	ctx := context.Background()
	testkit.EventuallyNil(t, 10*time.Second, "drop the first replica's slot", func() error {
		db.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'resyncing' AND active_pid IS NOT NULL`)
		_, err := db.Exec(ctx, `SELECT pg_drop_replication_slot('resyncing')`)
		return err
	})
	// Reaches the first replica only by its resync's load.
	exec(t, db, `UPDATE items SET qty = -1`)
	testkit.Eventually(t, 30*time.Second, "the first replica waits for a turn to load again", func() bool {
		return errors.Is(resyncing.Err(), replica.ErrSnapshotQueued)
	})
	l.release("holder")
	for _, tb := range []*replica.Table[int32, item]{resyncing, holder} {
		waitReady(t, tb)
		converged(t, db, tb)
	}
	if n := src.ResyncsByReason()[replica.ResyncSlotDropped]; n != 1 {
		t.Errorf("%d resyncs for a dropped slot, want 1", n)
	}
}
