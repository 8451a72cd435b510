package replica_test

// Table shapes production schemas have: large values left unchanged by
// an update, publications made or changed by someone else, partitioned
// tables, generated columns, domains, REPLICA IDENTITY FULL, decode
// functions that panic, and servers whose text formats differ from the
// defaults. Each test fails if the replica serves wrong or frozen data
// while it says it is Ready.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// readyTable is what the tests wait on: any Table.
type readyTable interface {
	WaitReady(context.Context) error
	Ready() bool
	Err() error
}

func waitReadyT(t *testing.T, tb readyTable) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tb.WaitReady(ctx); err != nil {
		t.Fatalf("not ready: %v", err)
	}
}

// caughtUp waits until src has applied everything written to the server
// so far and tb is Ready: from then on tb must equal the database.
func caughtUp(t *testing.T, db *pgxpool.Pool, src *replica.PostgresSource, tb readyTable) {
	t.Helper()
	var pos string
	if err := db.QueryRow(context.Background(), "SELECT pg_current_wal_insert_lsn()::text").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(pos)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the replica reaches "+pos, func() bool {
		return tb.Ready() && src.AppliedLSN() >= lsn
	})
}

// doc is a row with a large value (stored out of line: TOAST).
type doc struct {
	ID   int64
	Body string
	N    int32
}

func decodeDoc(r replica.Row) (doc, error) {
	id, ok := r["id"].(int64)
	if !ok {
		return doc{}, fmt.Errorf("id is %T", r["id"])
	}
	n, ok := r["n"].(int32)
	if !ok {
		return doc{}, fmt.Errorf("n is %T", r["n"])
	}
	body, _ := r["body"].(string)
	return doc{ID: id, Body: body, N: n}, nil
}

func docKey(r replica.Row) (int64, error) {
	id, ok := r["id"].(int64)
	if !ok {
		return 0, fmt.Errorf("id is %T", r["id"])
	}
	return id, nil
}

// readDocs reads the docs table as the replica should hold it.
func readDocs(db *pgxpool.Pool) func() (map[int64]doc, error) {
	return func() (map[int64]doc, error) {
		return readRows(db, "SELECT id, coalesce(body, ''), n FROM docs", func(r pgx.Rows) (int64, doc, error) {
			var d doc
			err := r.Scan(&d.ID, &d.Body, &d.N)
			return d.ID, d, err
		})
	}
}

// convergesTo waits until tb holds exactly what read returns.
func convergesTo[K comparable, V comparable](t *testing.T, tb *replica.Table[K, V], read func() (map[K]V, error)) {
	t.Helper()
	testkit.EventuallyNil(t, 30*time.Second, "the replica converges to the database", func() error {
		want, err := read()
		if err != nil {
			return err
		}
		if tb.Len() != len(want) {
			return fmt.Errorf("replica has %d rows, database %d (ready %v, err %v)", tb.Len(), len(want), tb.Ready(), tb.Err())
		}
		for k, w := range want {
			if got, ok := tb.Get(k); !ok || got != w {
				return fmt.Errorf("row %v: replica %s (present %v), database %s", k, short(got), ok, short(w))
			}
		}
		return nil
	})
}

// short prints v cut to 200 bytes.
func short(v any) string {
	s := fmt.Sprintf("%+v", v)
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// bigText is a value of n bytes Postgres cannot compress below its TOAST
// threshold, so it is stored out of line.
const bigText = `(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, %d))`

// TestUnchangedLargeValueIsKept: an update that leaves a large value
// (stored out of line) unchanged does not carry it in the change stream
// under the default replica identity; the replica keeps it from its own
// copy of the row, also when the key changes and for rows that came by
// the stream.
func TestUnchangedLargeValueIsKept(t *testing.T) {
	dsn, db := emptyDB(t, `CREATE TABLE docs (id bigint PRIMARY KEY, body text, n int NOT NULL);
		INSERT INTO docs SELECT g, `+fmt.Sprintf(bigText, 512)+`, 0 FROM generate_series(1, 3) g`)
	tb := replica.NewTable[int64, doc]("docs")
	src, _ := run(t, dsn, replica.Bind(tb, docKey, decodeDoc))
	waitReadyT(t, tb)
	exec(t, db, `INSERT INTO docs VALUES (10, `+fmt.Sprintf(bigText, 256)+`, 0)`)
	exec(t, db, `UPDATE docs SET n = n + 1`)                   // every row, body untouched
	exec(t, db, `UPDATE docs SET id = 20, n = 5 WHERE id = 2`) // a new key, body untouched
	exec(t, db, `BEGIN; UPDATE docs SET n = 7 WHERE id = 3; DELETE FROM docs WHERE id = 3; INSERT INTO docs VALUES (3, 'small', 1); UPDATE docs SET n = 8 WHERE id = 3; COMMIT`)
	caughtUp(t, db, src, tb)
	convergesTo(t, tb, readDocs(db))
	if d, _ := tb.Get(1); len(d.Body) != 16384 {
		t.Fatalf("row 1's body is %d bytes in the replica, 16384 in the database", len(d.Body))
	}
	if n := src.DecodeErrors(); n != 0 {
		t.Fatalf("%d decode errors", n)
	}
}

// TestPublicationWithoutTheTable: an existing publication that lacks a
// bound table, or some of the operations, is completed at start.
func TestPublicationWithoutTheTable(t *testing.T) {
	for _, tt := range []struct{ name, pub string }{
		{"table missing", `CREATE TABLE other (id int PRIMARY KEY); CREATE PUBLICATION pub FOR TABLE other`},
		{"inserts only", `CREATE PUBLICATION pub FOR TABLE items WITH (publish = 'insert')`},
		{"tables in another schema", `CREATE SCHEMA s; CREATE PUBLICATION pub FOR TABLES IN SCHEMA s`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn, db := setup(t, 50)
			exec(t, db, tt.pub)
			tb := replica.NewTable[int32, item]("items")
			src, _ := run(t, dsn, bindItems(tb), replica.PostgresPublication("pub"))
			waitReadyT(t, tb)
			exec(t, db, `UPDATE items SET qty = -1 WHERE id = 1; DELETE FROM items WHERE id = 2`)
			caughtUp(t, db, src, tb)
			if d := diffDB(db, tb); d != "" {
				t.Fatalf("Ready, caught up, and different from the database: %s", d)
			}
		})
	}
}

// diffDB compares the items replica with the database once.
func diffDB(db *pgxpool.Pool, tb *replica.Table[int32, item]) string {
	want, err := itemsIn(db, "SELECT id, name, qty FROM items")
	if err != nil {
		return err.Error()
	}
	return diff(want, tb)
}

// TestPublicationChangedWhileRunning: the publication loses the table
// (someone altered it; a migration dropped and recreated the table)
// while the replica runs. At its next reconnect the replica puts the
// table back and reloads, since changes were lost meanwhile.
func TestPublicationChangedWhileRunning(t *testing.T) {
	for _, tt := range []struct{ name, change string }{
		{"table dropped from the publication", `ALTER PUBLICATION pubc DROP TABLE items; UPDATE items SET qty = -1 WHERE id <= 10; DELETE FROM items WHERE id > 40`},
		{"table recreated", `DROP TABLE items; CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL); INSERT INTO items VALUES (1, 'new', 1)`},
		{"deletes no longer published", `ALTER PUBLICATION pubc SET (publish = 'insert, update'); DELETE FROM items WHERE id > 40`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn, db := setup(t, 50)
			slot := fmt.Sprintf("pubc_%d", rand.IntN(1e6))
			tb := replica.NewTable[int32, item]("items")
			src, _ := run(t, dsn, bindItems(tb), replica.PostgresPublication("pubc"), replica.PostgresSlot(slot))
			waitReadyT(t, tb)
			exec(t, db, tt.change)
			terminateWalsender(t, db, slot)
			waitUnready(t, tb)
			caughtUp(t, db, src, tb)
			converged(t, db, tb)
			if n := src.ResyncsByReason()["publication_changed"]; n != 1 {
				t.Errorf("resyncs %v, want one publication_changed", src.ResyncsByReason())
			}
		})
	}
}

// withUser returns dsn with another user and password.
func withUser(t *testing.T, dsn, user, password string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// runErr runs a source and returns what Run returned, or fails if it has
// not returned within d.
func runErr(t *testing.T, src *replica.PostgresSource, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- src.Run(ctx) }()
	select {
	case err := <-ran:
		return err
	case <-time.After(d):
		cancel()
		<-ran
		t.Fatalf("Run did not fail at start within %s", d)
		return nil
	}
}

// TestPublicationNotAlterable: a publication that lacks a bound table and
// that the replica's user may not change fails the start with an error
// naming the table and the statement that fixes it.
func TestPublicationNotAlterable(t *testing.T) {
	dsn, db := setup(t, 5)
	role := fmt.Sprintf("repl_%d", rand.IntN(1e6))
	u, _ := url.Parse(dsn)
	exec(t, db, fmt.Sprintf(`CREATE ROLE %s LOGIN REPLICATION PASSWORD 'pw'; GRANT CONNECT ON DATABASE %s TO %[1]s; GRANT SELECT ON items TO %[1]s;
		CREATE TABLE other (id int PRIMARY KEY); CREATE PUBLICATION owned FOR TABLE other`, role, strings.TrimPrefix(u.Path, "/")))
	t.Cleanup(func() {
		db.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %s; DROP ROLE %[1]s`, role))
	})
	tb := replica.NewTable[int32, item]("items")
	src, err := replica.NewPostgresSource(withUser(t, dsn, role, "pw"), []replica.Binding{bindItems(tb)},
		replica.PostgresPublication("owned"), replica.PostgresSlot(role), replica.PostgresBackoff(20*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	err = runErr(t, src, 20*time.Second)
	t.Logf("Run: %v", err)
	if err == nil || !strings.Contains(err.Error(), "public.items") || !strings.Contains(err.Error(), `ALTER PUBLICATION "owned" ADD TABLE "public"."items"`) {
		t.Fatalf("Run returned %v, want an error naming public.items and the statement", err)
	}
	if tb.Ready() || tb.Err() == nil {
		t.Fatalf("the table says ready=%v err=%v", tb.Ready(), tb.Err())
	}
}

// TestPartitionedTable follows a partitioned table: changes arrive under
// its partitions' names, rows move between partitions, and a TRUNCATE
// of one partition, or of the whole table, empties only what it
// empties.
func TestPartitionedTable(t *testing.T) {
	dsn, db := emptyDB(t, `CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL) PARTITION BY RANGE (id);
		CREATE TABLE items_low PARTITION OF items FOR VALUES FROM (MINVALUE) TO (500);
		CREATE TABLE items_high PARTITION OF items FOR VALUES FROM (500) TO (5000);
		INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, 1000) g`)
	tb := replica.NewTable[int32, item]("items")
	src, _ := run(t, dsn, bindItems(tb), replica.PostgresCatalogCheck(200*time.Millisecond))
	waitReadyT(t, tb)
	exec(t, db, `UPDATE items SET qty = -1 WHERE id % 10 = 0; DELETE FROM items WHERE id % 7 = 0;
		UPDATE items SET id = id + 2000 WHERE id BETWEEN 100 AND 120; INSERT INTO items VALUES (3000, 'new', 1)`)
	caughtUp(t, db, src, tb)
	if d := diffDB(db, tb); d != "" {
		t.Fatalf("Ready, caught up, and different from the database: %s", d)
	}
	exec(t, db, `TRUNCATE items_low`)
	converged(t, db, tb)
	exec(t, db, `INSERT INTO items VALUES (1, 'back', 1); TRUNCATE items; INSERT INTO items VALUES (2, 'after', 2)`)
	converged(t, db, tb)
	caughtUp(t, db, src, tb)
	if d := diffDB(db, tb); d != "" {
		t.Fatal(d)
	}
	// Partitions attached with their rows, or detached: rows come and go
	// without a change in the stream.
	exec(t, db, `CREATE TABLE items_more (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
		INSERT INTO items_more SELECT g, 'more', 1 FROM generate_series(5000, 5099) g;
		ALTER TABLE items ATTACH PARTITION items_more FOR VALUES FROM (5000) TO (6000)`)
	converged(t, db, tb)
	exec(t, db, `ALTER TABLE items DETACH PARTITION items_low`)
	converged(t, db, tb)
	exec(t, db, `UPDATE items SET qty = 7 WHERE id = 5001`)
	caughtUp(t, db, src, tb)
	if d := diffDB(db, tb); d != "" {
		t.Fatal(d)
	}
	t.Logf("resyncs %v", src.ResyncsByReason())
}

// TestGeneratedColumns: the change stream leaves stored generated
// columns out; rows from the snapshot must carry the same columns as
// rows from the stream, or a decoder sees two shapes of one table.
func TestGeneratedColumns(t *testing.T) {
	dsn, db := setup(t, 20)
	exec(t, db, `ALTER TABLE items ADD COLUMN double int GENERATED ALWAYS AS (qty * 2) STORED`)
	var mu sync.Mutex
	shapes := map[string]int{}
	tb := replica.NewTable[int32, item]("items")
	src, _ := run(t, dsn, replica.Bind(tb, itemKey, func(r replica.Row) (item, error) {
		cols := make([]string, 0, len(r))
		for c := range r {
			cols = append(cols, c)
		}
		slices.Sort(cols)
		mu.Lock()
		shapes[strings.Join(cols, ",")]++
		mu.Unlock()
		return decodeItem(r)
	}))
	waitReadyT(t, tb)
	exec(t, db, `UPDATE items SET qty = qty + 1; INSERT INTO items (id, name, qty) VALUES (100, 'new', 1)`)
	caughtUp(t, db, src, tb)
	converged(t, db, tb)
	mu.Lock()
	defer mu.Unlock()
	if len(shapes) != 1 {
		t.Fatalf("the decoder saw rows of %d shapes: %v", len(shapes), shapes)
	}
}

// thing has a key of a domain type.
type thing struct {
	ID   int64
	Name string
}

// TestDomainTypedKey: a key of a domain over bigint is an int64 in rows
// from the snapshot and from the stream alike, so deletes and updates
// find their rows.
func TestDomainTypedKey(t *testing.T) {
	dsn, db := emptyDB(t, `CREATE DOMAIN thing_id AS bigint CHECK (VALUE > 0); CREATE DOMAIN label AS text;
		CREATE TABLE things (id thing_id PRIMARY KEY, name label NOT NULL);
		INSERT INTO things SELECT g, 'thing ' || g FROM generate_series(1, 20) g`)
	tb := replica.NewTable[int64, thing]("things")
	key := func(r replica.Row) (int64, error) {
		id, ok := r["id"].(int64)
		if !ok {
			return 0, fmt.Errorf("id is %T", r["id"])
		}
		return id, nil
	}
	src, _ := run(t, dsn, replica.Bind(tb, key, func(r replica.Row) (thing, error) {
		id, err := key(r)
		name, ok := r["name"].(string)
		if !ok {
			return thing{}, fmt.Errorf("name is %T", r["name"])
		}
		return thing{ID: id, Name: name}, err
	}))
	waitReadyT(t, tb)
	exec(t, db, `DELETE FROM things WHERE id <= 5; UPDATE things SET name = 'renamed' WHERE id = 10; INSERT INTO things VALUES (100, 'new')`)
	caughtUp(t, db, src, tb)
	convergesTo(t, tb, func() (map[int64]thing, error) {
		return readRows(db, "SELECT id, name FROM things", func(r pgx.Rows) (int64, thing, error) {
			var th thing
			err := r.Scan(&th.ID, &th.Name)
			return th.ID, th, err
		})
	})
	if n := src.DecodeErrors(); n != 0 {
		t.Fatalf("%d decode errors", n)
	}
}

// TestFullIdentityUpdates: under REPLICA IDENTITY FULL every update
// carries the old row. An update that keeps the key is one upsert (no
// delete for change hooks), one whose new row fails to decode leaves the
// row as it was, and one that changes the key deletes the old key.
func TestFullIdentityUpdates(t *testing.T) {
	dsn, db := setup(t, 5)
	exec(t, db, `ALTER TABLE items REPLICA IDENTITY FULL`)
	tb := replica.NewTable[int32, item]("items")
	var mu sync.Mutex
	var seen []string
	tb.OnChange(func(c replica.Change[int32, item]) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%d:%d", c.Op, c.Key))
		mu.Unlock()
	})
	src, _ := run(t, dsn, bindItems(tb))
	waitReadyT(t, tb)
	exec(t, db, `UPDATE items SET qty = 100 WHERE id = 1`)
	exec(t, db, `UPDATE items SET name = 'poison' WHERE id = 2`)
	exec(t, db, `UPDATE items SET id = 30 WHERE id = 3`)
	caughtUp(t, db, src, tb)
	mu.Lock()
	got := strings.Join(seen[1:], " ") // after the load's Reload
	mu.Unlock()
	if want := fmt.Sprintf("%d:1 %d:3 %d:30", replica.Upsert, replica.Delete, replica.Upsert); got != want {
		t.Errorf("change hooks saw %q, want %q", got, want)
	}
	if it, ok := tb.Get(2); !ok || it.Name != "item 2" {
		t.Errorf("row 2 after an update that does not decode: %+v present %v, want it as it was", it, ok)
	}
	if n := src.DecodeErrors(); n != 1 {
		t.Errorf("%d decode errors, want 1", n)
	}
}

// TestPanickingDecoder: a decode or key function that panics costs its
// row, counted as a decode error, not the process.
func TestPanickingDecoder(t *testing.T) {
	dsn, db := setup(t, 10)
	exec(t, db, `INSERT INTO items VALUES (100, 'panic', 1)`)
	tb := replica.NewTable[int32, item]("items")
	src, _ := run(t, dsn, replica.Bind(tb, func(r replica.Row) (int32, error) {
		if r["id"] == int32(103) {
			panic("the key function's bug")
		}
		return r["id"].(int32), nil
	}, func(r replica.Row) (item, error) {
		if r["name"] == "panic" {
			var m map[string]int
			m["boom"] = 1
		}
		return decodeItem(r)
	}))
	waitReadyT(t, tb)
	exec(t, db, `INSERT INTO items VALUES (101, 'panic', 1), (102, 'fine', 2), (103, 'key', 3); UPDATE items SET name = 'panic' WHERE id = 1`)
	caughtUp(t, db, src, tb)
	if _, ok := tb.Get(102); !ok {
		t.Fatal("the good row of the transaction is missing")
	}
	if n := src.DecodeErrors(); n != 4 {
		t.Fatalf("%d decode errors, want 4 (one panicking row in the snapshot, three in the stream)", n)
	}
	if !tb.Ready() {
		t.Fatalf("not ready: %v", tb.Err())
	}
}

// TestServerTextFormats: a database whose defaults change how values are
// written as text (bytea_output escape, a non-ISO DateStyle, the SQL
// standard's IntervalStyle, fewer float digits) still replicates exact
// values.
func TestServerTextFormats(t *testing.T) {
	dsn, db := emptyDB(t, "")
	var dbName string
	db.QueryRow(context.Background(), "SELECT current_database()").Scan(&dbName)
	exec(t, db, fmt.Sprintf(`ALTER DATABASE %s SET bytea_output = 'escape'; ALTER DATABASE %[1]s SET DateStyle = 'SQL, DMY';
		ALTER DATABASE %[1]s SET IntervalStyle = 'sql_standard'; ALTER DATABASE %[1]s SET extra_float_digits = 0; ALTER DATABASE %[1]s SET TimeZone = 'Asia/Kolkata'`, dbName))
	db.Reset()
	exec(t, db, `CREATE TABLE vals (id int PRIMARY KEY, b bytea, ts timestamptz, d date, iv interval, f float8);
		INSERT INTO vals VALUES (1, '\x00ff10', '2024-03-01 12:34:56.789+00', '2024-03-01', '1 day 02:03:04', 0.1::float8 + 0.2::float8)`)
	type val struct {
		B  string
		TS time.Time
		D  time.Time
		IV pgtype.Interval
		F  float64
	}
	tb := replica.NewTable[int32, val]("vals")
	src, _ := run(t, dsn, replica.Bind(tb, func(r replica.Row) (int32, error) { return itemKeyOf(r, "id") },
		func(r replica.Row) (val, error) {
			var v val
			var errs []error
			b, ok := r["b"].([]byte)
			if !ok {
				errs = append(errs, fmt.Errorf("b is %T %v", r["b"], r["b"]))
			}
			v.B = fmt.Sprintf("%x", b)
			if v.TS, ok = r["ts"].(time.Time); !ok {
				errs = append(errs, fmt.Errorf("ts is %T %v", r["ts"], r["ts"]))
			}
			v.TS = v.TS.UTC()
			if v.D, ok = r["d"].(time.Time); !ok {
				errs = append(errs, fmt.Errorf("d is %T %v", r["d"], r["d"]))
			}
			if v.IV, ok = r["iv"].(pgtype.Interval); !ok {
				errs = append(errs, fmt.Errorf("iv is %T %v", r["iv"], r["iv"]))
			}
			if v.F, ok = r["f"].(float64); !ok {
				errs = append(errs, fmt.Errorf("f is %T %v", r["f"], r["f"]))
			}
			return v, errors.Join(errs...)
		}))
	waitReadyT(t, tb)
	exec(t, db, `INSERT INTO vals SELECT 2, b, ts, d, iv, f FROM vals WHERE id = 1; UPDATE vals SET b = '\xdeadbeef', f = 1.0/3 WHERE id = 1`)
	caughtUp(t, db, src, tb)
	convergesTo(t, tb, func() (map[int32]val, error) {
		return readRows(db, "SELECT id, b, ts, d, iv, f FROM vals", func(r pgx.Rows) (int32, val, error) {
			var id int32
			var v val
			var b []byte
			err := r.Scan(&id, &b, &v.TS, &v.D, &v.IV, &v.F)
			v.B, v.TS = fmt.Sprintf("%x", b), v.TS.UTC()
			return id, v, err
		})
	})
	if n := src.DecodeErrors(); n != 0 {
		t.Fatalf("%d decode errors", n)
	}
}

// TestUnsupportedTablesFailAtStart: a bound table the replica cannot
// follow fails Run at once, with what to change, and is not added to the
// publication (a table without a replica identity in a publication that
// publishes updates makes its UPDATEs fail).
func TestUnsupportedTablesFailAtStart(t *testing.T) {
	for _, tt := range []struct {
		name, schema string
		key          func(replica.Row) (int32, error)
		want         []string
	}{
		{"no primary key", `CREATE TABLE t (id int NOT NULL, name text NOT NULL, qty int NOT NULL)`, itemKey,
			[]string{"public.t", "primary key", "REPLICA IDENTITY FULL"}},
		{"replica identity nothing", `CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL); ALTER TABLE t REPLICA IDENTITY NOTHING`, itemKey,
			[]string{"public.t", "REPLICA IDENTITY NOTHING"}},
		{"a view", `CREATE TABLE base (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL); CREATE VIEW t AS SELECT * FROM base`, itemKey,
			[]string{"public.t", "view"}},
		{"unlogged", `CREATE UNLOGGED TABLE t (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL)`, itemKey,
			[]string{"public.t", "SET LOGGED"}},
		{"key beyond the identity", `CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL)`,
			func(r replica.Row) (int32, error) { return itemKeyOf(r, "qty") },
			[]string{"public.t", "[id]", "key function"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn, db := emptyDB(t, tt.schema)
			if tt.name != "a view" {
				exec(t, db, `INSERT INTO t VALUES (1, 'one', 10)`)
			}
			tb := replica.NewTable[int32, item]("t")
			src, err := replica.NewPostgresSource(dsn, []replica.Binding{replica.Bind(tb, tt.key, decodeItem)},
				replica.PostgresBackoff(20*time.Millisecond, 100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			err = runErr(t, src, 20*time.Second)
			t.Logf("Run: %v", err)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("Run returned %v, want an error with %q", err, w)
				}
			}
			if !errors.Is(err, replica.ErrUnsupportedTable) {
				t.Errorf("the error does not wrap ErrUnsupportedTable")
			}
			if tt.name != "a view" {
				exec(t, db, `UPDATE t SET qty = 2`) // fails if t was published without a replica identity
			}
		})
	}
}

// TestCatalogChangesWhileStreaming: changes the stream does not carry,
// made while the replica streams without a reconnect to notice them at,
// reach it through its reads of the catalog.
func TestCatalogChangesWhileStreaming(t *testing.T) {
	for _, tt := range []struct{ name, change string }{
		{"table dropped from the publication", `ALTER PUBLICATION hlab_replica DROP TABLE items; UPDATE items SET qty = -1 WHERE id <= 10; DELETE FROM items WHERE id > 40`},
		{"table recreated", `DROP TABLE items; CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL); INSERT INTO items VALUES (1, 'new', 1)`},
		{"column added with a default", `ALTER TABLE items ADD COLUMN color text NOT NULL DEFAULT 'red'`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn, db := setup(t, 50)
			tb := replica.NewTable[int32, item]("items")
			// A color, where there is one, is part of the name.
			src, _ := run(t, dsn, replica.Bind(tb, itemKey, func(r replica.Row) (item, error) {
				it, err := decodeItem(r)
				if c, ok := r["color"].(string); ok {
					it.Name += "/" + c
				}
				return it, err
			}), replica.PostgresCatalogCheck(200*time.Millisecond))
			waitReadyT(t, tb)
			exec(t, db, tt.change)
			convergedTo(t, tb, "the database", func() (map[int32]item, error) {
				return itemsIn(db, "SELECT id, name || coalesce('/' || (to_jsonb(items) ->> 'color'), ''), qty FROM items")
			})
			waitReadyT(t, tb)
			t.Logf("resyncs %v", src.ResyncsByReason())
		})
	}
}

// TestTableMadeAfterStart: a bound table that does not exist yet (its
// migration has not run) keeps the replica not Ready, saying so, until
// it is made.
func TestTableMadeAfterStart(t *testing.T) {
	dsn, db := emptyDB(t, "")
	tb := replica.NewTable[int32, item]("items")
	run(t, dsn, bindItems(tb))
	testkit.Eventually(t, 10*time.Second, "the replica says the table does not exist", func() bool {
		return !tb.Ready() && tb.Err() != nil && strings.Contains(tb.Err().Error(), "public.items does not exist")
	})
	exec(t, db, `CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL); INSERT INTO items VALUES (1, 'one', 1)`)
	waitReadyT(t, tb)
	converged(t, db, tb)
}
