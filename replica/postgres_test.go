package replica_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// The tests share one Postgres: refdatatest's, the one the tests of the
// services built on replica use.
func TestMain(m *testing.M) {
	if code, child := runDiskChild(); child {
		os.Exit(code)
	}
	os.Exit(refdatatest.Main(m, exampleDatabase))
}

// exampleDatabase gives Example a database of its own on the tests'
// server, unless DATABASE_URL names one already (the README's quickstart
// runs it against a server of "hlab deps up postgres").
func exampleDatabase(pg *deps.Postgres) error {
	if os.Getenv("DATABASE_URL") != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pg.CreateDatabase(ctx, "example"); err != nil {
		return err
	}
	return os.Setenv("DATABASE_URL", pg.DSN("example"))
}

type item struct {
	ID   int32
	Name string
	Qty  int32
}

func bindItems(t *replica.Table[int32, item]) replica.Binding {
	return replica.Bind(t, itemKey, decodeItem)
}

func itemKey(r replica.Row) (int32, error) { return itemKeyOf(r, "id") }

func decodeItem(r replica.Row) (item, error) { return decodeItemOf(r, "id", "row") }

// itemKeyOf is the key of an item row whose id is the field key.
func itemKeyOf(r replica.Row, key string) (int32, error) {
	id, ok := r[key].(int32)
	if !ok {
		return 0, fmt.Errorf("%s is %T", key, r[key])
	}
	return id, nil
}

// decodeItemOf decodes an item row whose id is the field key; a row
// named "poison" fails, as a "poison what".
func decodeItemOf(r replica.Row, key, what string) (item, error) {
	name, _ := r["name"].(string)
	qty, ok := r["qty"].(int32)
	if !ok {
		return item{}, fmt.Errorf("qty is %T, want int32", r["qty"])
	}
	if name == "poison" {
		return item{}, errors.New("poison " + what)
	}
	return item{ID: r[key].(int32), Name: name, Qty: qty}, nil
}

// setup makes a database with an items table of rows rows and returns
// a pool on it.
func setup(t *testing.T, rows int) (dsn string, db *pgxpool.Pool) {
	t.Helper()
	dsn, db = emptyDB(t, `CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL)`)
	exec(t, db, `INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, $1) g`, rows)
	return dsn, db
}

// emptyDB makes a database of its own and returns its DSN and a pool on
// it, after running schema there.
func emptyDB(t *testing.T, schema string) (dsn string, db *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("t%d", rand.Int64())
	if err := refdatatest.Postgres().CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	dsn = refdatatest.Postgres().DSN(name)
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if schema != "" {
		exec(t, db, schema)
	}
	return dsn, db
}

func exec(t *testing.T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// readRows reads the rows of query into a map, each made by scan.
func readRows[K comparable, V any](db *pgxpool.Pool, query string, scan func(pgx.Rows) (K, V, error)) (map[K]V, error) {
	rows, err := db.Query(context.Background(), query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[K]V{}
	for rows.Next() {
		k, v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// itemsIn reads items as query (id, name, qty) gives them.
func itemsIn(db *pgxpool.Pool, query string) (map[int32]item, error) {
	return readRows(db, query, func(r pgx.Rows) (int32, item, error) {
		var it item
		err := r.Scan(&it.ID, &it.Name, &it.Qty)
		return it.ID, it, err
	})
}

// start runs a source for items and waits until it is ready.
func start(t *testing.T, dsn string, opts ...replica.PostgresOption) (*replica.Table[int32, item], *replica.PostgresSource) {
	t.Helper()
	tb := replica.NewTable[int32, item]("items")
	src, _ := run(t, dsn, bindItems(tb), opts...)
	waitReady(t, tb)
	return tb, src
}

// run runs a source for b with the tests' short backoff and status
// interval (opts may override them) until t ends or stop is called; it
// does not wait for readiness. stop returns once Run has.
func run(t *testing.T, dsn string, b replica.Binding, opts ...replica.PostgresOption) (src *replica.PostgresSource, stop func()) {
	t.Helper()
	opts = append([]replica.PostgresOption{replica.PostgresBackoff(20*time.Millisecond, 200*time.Millisecond), replica.PostgresStatusInterval(100 * time.Millisecond)}, opts...)
	src, err := replica.NewPostgresSource(dsn, []replica.Binding{b}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.Run(ctx); close(done) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return src, stop
}

// writer changes random rows until stopped: inserts, updates, deletes,
// several per transaction.
func writer(ctx context.Context, db *pgxpool.Pool, seed uint64, maxID int) error {
	r := rand.New(rand.NewPCG(seed, 7))
	for ctx.Err() == nil {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			for range 1 + r.IntN(4) {
				id := 1 + r.IntN(maxID)
				var err error
				switch r.IntN(3) {
				case 0:
					_, err = tx.Exec(ctx, "INSERT INTO items VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET qty = items.qty + 1", id, fmt.Sprint("w", id), r.IntN(1000))
				case 1:
					_, err = tx.Exec(ctx, "UPDATE items SET qty = $2, name = $3 WHERE id = $1", id, r.IntN(1000), fmt.Sprint("u", r.IntN(100)))
				case 2:
					_, err = tx.Exec(ctx, "DELETE FROM items WHERE id = $1", id)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			// Deadlocks between writers are expected; others are not.
			var msg string
			if err != nil {
				msg = err.Error()
			}
			if !containsAny(msg, "deadlock", "could not serialize", "terminating connection", "connection") {
				return err
			}
		}
	}
	return nil
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if len(s) >= len(sub) {
			for i := 0; i+len(sub) <= len(s); i++ {
				if s[i:i+len(sub)] == sub {
					return true
				}
			}
		}
	}
	return false
}

// converged waits until the replica equals the database, row by row.
func converged(t *testing.T, db *pgxpool.Pool, tb *replica.Table[int32, item]) {
	t.Helper()
	convergedTo(t, tb, "the database", func() (map[int32]item, error) { return itemsIn(db, "SELECT id, name, qty FROM items") })
}

// convergedTo waits until the replica in tb equals what read returns.
func convergedTo(t *testing.T, tb *replica.Table[int32, item], what string, read func() (map[int32]item, error)) {
	t.Helper()
	testkit.EventuallyNil(t, 30*time.Second, "the replica converges to "+what, func() error {
		want, err := read()
		if err != nil {
			return err
		}
		if d := diff(want, tb); d != "" {
			return fmt.Errorf("%s (source err: %v)", d, tb.Err())
		}
		return nil
	})
}

func diff(want map[int32]item, tb *replica.Table[int32, item]) string {
	if tb.Len() != len(want) {
		return fmt.Sprintf("replica has %d rows, database %d", tb.Len(), len(want))
	}
	for id, w := range want {
		if got, ok := tb.Get(id); !ok || got != w {
			return fmt.Sprintf("row %d: replica %+v (present %v), database %+v", id, got, ok, w)
		}
	}
	return ""
}

// TestSnapshotStreamBoundary starts the replica while writers run: no
// change around the snapshot may be lost or applied twice.
func TestSnapshotStreamBoundary(t *testing.T) {
	dsn, db := setup(t, 2000)
	stop := runWriters(t, 4, func(ctx context.Context, i int) error { return writer(ctx, db, uint64(i), 3000) })
	time.Sleep(200 * time.Millisecond)
	tb, _ := start(t, dsn)
	time.Sleep(500 * time.Millisecond)
	stop()
	converged(t, db, tb)
}

// runWriters runs n writers, write(ctx, 0) to write(ctx, n-1), until the
// returned stop is called; stop cancels their context, waits for them and
// fails t with the first error one returned.
func runWriters(t *testing.T, n int, write func(ctx context.Context, i int) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- write(ctx, i) })
	}
	return func() {
		t.Helper()
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// walsender returns the pid of the replication connection of slot.
func terminateWalsender(t *testing.T, db *pgxpool.Pool, slot string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "an active replication connection to kill", func() bool {
		var n int
		db.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot).Scan(&n)
		return n > 0
	})
}

// waitUnready waits until the table reports it is not current, with a reason.
func waitUnready(t *testing.T, tb *replica.Table[int32, item]) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for tb.Ready() || tb.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the replica stayed ready with no error after losing its stream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("while down: ready=%v err=%v", tb.Ready(), tb.Err())
}

func TestKillReplicationConnection(t *testing.T) {
	dsn, db := setup(t, 500)
	tb, src := start(t, dsn, replica.PostgresSlot("kill_conn"))
	stop := runWriters(t, 1, func(ctx context.Context, _ int) error { return writer(ctx, db, 1, 800) })
	time.Sleep(200 * time.Millisecond)
	terminateWalsender(t, db, "kill_conn")
	waitUnready(t, tb)
	time.Sleep(200 * time.Millisecond)
	stop()
	converged(t, db, tb)
	waitReady(t, tb)
	if src.Resyncs() != 0 {
		t.Errorf("%d resyncs: a killed connection should resume from the slot", src.Resyncs())
	}
}

func waitReady(t *testing.T, tb *replica.Table[int32, item]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tb.WaitReady(ctx); err != nil {
		t.Fatalf("not ready again: %v", err)
	}
}

func TestDroppedSlotResyncs(t *testing.T) {
	dsn, db := setup(t, 500)
	tb, src := start(t, dsn, replica.PostgresSlot("dropped"))
	ctx := context.Background()
	// Kill the connection and drop the slot before the replica reconnects.
	testkit.EventuallyNil(t, 10*time.Second, "drop the slot", func() error {
		db.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'dropped' AND active_pid IS NOT NULL`)
		_, err := db.Exec(ctx, `SELECT pg_drop_replication_slot('dropped')`)
		return err
	})
	// Changes made while no slot exists reach the replica only by a resync.
	resyncs(t, db, tb, src, `DELETE FROM items WHERE id <= 100; UPDATE items SET qty = -1 WHERE id > 400`, replica.ResyncSlotDropped)
}

// resyncs makes changes (SQL) that the replica's stream cannot carry any
// more, and checks that they reach the replica by exactly one resync, for
// reason.
func resyncs(t *testing.T, db *pgxpool.Pool, tb *replica.Table[int32, item], src *replica.PostgresSource, changes, reason string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), changes); err != nil {
		t.Fatal(err)
	}
	converged(t, db, tb)
	waitReady(t, tb)
	if n := src.ResyncsByReason(); n[reason] != 1 || src.Resyncs() != 1 {
		t.Errorf("resyncs %v, want one %s", n, reason)
	}
}

func TestPostgresRestart(t *testing.T) {
	dsn, db := setup(t, 300)
	tb, _ := start(t, dsn, replica.PostgresSlot("restart"))
	if err := refdatatest.Postgres().StopServer(); err != nil {
		t.Fatal(err)
	}
	waitUnready(t, tb)
	if err := refdatatest.Postgres().StartServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.Reset()
	if _, err := db.Exec(context.Background(), `UPDATE items SET name = 'after restart' WHERE id % 3 = 0; INSERT INTO items VALUES (5000, 'new', 1)`); err != nil {
		t.Fatal(err)
	}
	converged(t, db, tb)
	waitReady(t, tb)
}

func TestUndecodableRowsAreSkipped(t *testing.T) {
	dsn, db := setup(t, 10)
	tb, src := start(t, dsn, replica.PostgresSlot("poison"))
	if _, err := db.Exec(context.Background(), `INSERT INTO items VALUES (100, 'poison', 1), (101, 'fine', 2)`); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the good row of the transaction arrives", func() bool { _, ok := tb.Get(101); return ok })
	if _, ok := tb.Get(100); ok {
		t.Fatal("the poison row was applied")
	}
	if src.DecodeErrors() != 1 {
		t.Fatalf("DecodeErrors = %d, want 1", src.DecodeErrors())
	}
	if !tb.Ready() {
		t.Fatalf("a bad row made the replica unready: %v", tb.Err())
	}
}
