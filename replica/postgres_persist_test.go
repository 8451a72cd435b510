package replica_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// diskRows is the size of the table the restart test loads and
// restarts: large enough that a snapshot's cost shows beside a file's,
// small enough for make test; HLAB_REPLICA_DISK_ROWS sets another (the
// lab's --full row has a million).
var diskRows = 200_000

func init() {
	if n, err := strconv.Atoi(os.Getenv("HLAB_REPLICA_DISK_ROWS")); err == nil && n >= 1000 {
		diskRows = n
	}
}

// durable starts a durable source for items on slot, writing its file
// at path every 100 ms, and returns its table and source (not waiting
// for readiness) and how to stop Run.
func durable(t *testing.T, dsn, slot, path string) (*replica.Table[int32, item], *replica.PostgresSource, func()) {
	t.Helper()
	tb := replica.NewTable[int32, item]("items")
	db := dbOf(t, dsn)
	t.Cleanup(func() { dropDurableSlot(t, db, slot) }) // after Run has returned
	src, stop := run(t, dsn, bindItems(tb), replica.PostgresSlot(slot), replica.PostgresPersist(path, 100*time.Millisecond))
	return tb, src, stop
}

// dropDurableSlot drops a durable replica's slot, if it is still there,
// once its walsender is gone.
func dropDurableSlot(t *testing.T, db *pgxpool.Pool, slot string) {
	t.Helper()
	testkit.EventuallyNil(t, 10*time.Second, "drop the slot "+slot, func() error {
		_, err := db.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		return err
	})
}

func dbDSN(db *pgxpool.Pool) string { return db.Config().ConnString() }

func dbOf(t *testing.T, dsn string) *pgxpool.Pool {
	db, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// readyIn waits for tb and returns how long it took since start.
func readyIn(t *testing.T, tb *replica.Table[int32, item], start time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tb.WaitReady(ctx); err != nil {
		t.Fatalf("not ready: %v", err)
	}
	return time.Since(start)
}

// wantDiskStart checks how the source's first load went.
func wantDiskStart(t *testing.T, src *replica.PostgresSource, refused string) {
	t.Helper()
	tried, got := src.DiskStart()
	if !tried || got != refused {
		t.Fatalf("DiskStart = %v, %q; want true, %q", tried, got, refused)
	}
}

// changeWhileDown inserts, updates and deletes rows, each in its own
// transaction and several in one.
func changeWhileDown(t *testing.T, db *pgxpool.Pool, base int) {
	t.Helper()
	exec(t, db, `INSERT INTO items SELECT g, 'down ' || g, g FROM generate_series($1::int, $1::int + 99) g`, base)
	exec(t, db, `UPDATE items SET qty = qty + 1000, name = name || ' upd' WHERE id % 97 = 0`)
	exec(t, db, `DELETE FROM items WHERE id % 89 = 0`)
	exec(t, db, `UPDATE items SET qty = -1 WHERE id = $1`, base+5)
}

// fileWritten waits until the restart file at path exists and was
// written after since.
func fileWritten(t *testing.T, path string, since time.Time) {
	t.Helper()
	testkit.EventuallyNil(t, 30*time.Second, "a restart file written after "+since.String(), func() error {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if !st.ModTime().After(since) {
			return errors.New("the file is older")
		}
		return nil
	})
}

// TestRestartFromDisk: a durable replica stopped (Run's ctx ended) and
// started again loads its file and streams what changed meanwhile from
// its slot, ending with the database's rows, and no snapshot.
func TestRestartFromDisk(t *testing.T) {
	dsn, db := setup(t, diskRows)
	path := filepath.Join(t.TempDir(), "items.replica")

	begin := time.Now()
	tb, src, stop := durable(t, dsn, "disk_restart", path)
	fromSnapshot := readyIn(t, tb, begin)
	wantDiskStart(t, src, replica.DiskFileMissing)
	changeWhileDown(t, db, diskRows+1) // while it runs
	// A name stored out of line (TOAST): an update that leaves it
	// unchanged does not carry it, and the replica fills it in from what
	// it keeps of the row, which must come back from the file too.
	exec(t, db, `INSERT INTO items SELECT $1, string_agg(md5(random()::text), '') || ' toasted', 1 FROM generate_series(1, 300)`, diskRows+500)
	converged(t, db, tb)
	stop()
	if st := slotState(t, db, "disk_restart"); !st.exists {
		t.Fatal("the durable slot was dropped when Run ended")
	}
	changeWhileDown(t, db, diskRows+1001)
	exec(t, db, `UPDATE items SET qty = 7 WHERE id = $1`, diskRows+500)

	begin = time.Now()
	tb, src, stop = durable(t, dsn, "disk_restart", path)
	fromDisk := readyIn(t, tb, begin)
	wantDiskStart(t, src, "")
	converged(t, db, tb)
	if n := src.Resyncs(); n != 0 {
		t.Errorf("%d resyncs after a start from disk", n)
	}
	t.Logf("%d rows: ready in %v from a snapshot, %v from disk", diskRows, fromSnapshot.Round(time.Millisecond), fromDisk.Round(time.Millisecond))
	stop()
}

// TestRestartFromDiskFallsBack: a file that no longer fits is refused,
// with the reason, and the tables come from a snapshot.
func TestRestartFromDiskFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		meanwhile    func(t *testing.T, db *pgxpool.Pool, slot, path string)
	}{
		{"slot dropped", replica.DiskSlotMissing, func(t *testing.T, db *pgxpool.Pool, slot, _ string) { dropSlot(t, db, slot) }},
		{"column added", replica.DiskSchemaChanged, func(t *testing.T, db *pgxpool.Pool, _, _ string) {
			exec(t, db, `ALTER TABLE items ADD COLUMN note text DEFAULT 'n'`)
		}},
		{"slot invalidated", replica.DiskSlotInvalid, func(t *testing.T, db *pgxpool.Pool, slot, _ string) {
			// The stopped replica's slot falls past max_slot_wal_keep_size.
			setServer(t, "max_slot_wal_keep_size", "1MB")
			exec(t, db, `CREATE TABLE pad (x text)`)
			testkit.Eventually(t, 60*time.Second, "the server invalidates the slot", func() bool {
				for _, q := range []string{`INSERT INTO pad SELECT repeat('x', 100) FROM generate_series(1, 100)`, `SELECT pg_switch_wal()`, `CHECKPOINT`} {
					exec(t, db, q)
				}
				return slotState(t, db, slot).walStatus == "lost"
			})
		}},
		{"file torn", replica.DiskFileUnreadable, func(t *testing.T, _ *pgxpool.Pool, _, path string) {
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"slot ahead of the file", replica.DiskSlotAhead, func(t *testing.T, db *pgxpool.Pool, slot, path string) {
			// An older copy of the file put back (restored from a backup):
			// the slot has since confirmed past it.
			old, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			exec(t, db, `INSERT INTO items VALUES (100001, 'x', 1)`)
			var inserted pglogrepl.LSN
			if err := db.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()`).Scan(&inserted); err != nil {
				t.Fatal(err)
			}
			tb, _, stop := durable(t, dbDSN(db), slot, path)
			waitReady(t, tb)
			testkit.EventuallyNil(t, 30*time.Second, "the slot confirms past the insert", func() error {
				var confirmed pglogrepl.LSN
				err := db.QueryRow(context.Background(), `SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed)
				if err == nil && confirmed < inserted {
					err = fmt.Errorf("confirmed %s, the insert at %s", confirmed, inserted)
				}
				return err
			})
			stop()
			if err := os.WriteFile(path, old, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, db := setup(t, 500)
			slot := "disk_" + strings.ReplaceAll(tc.name, " ", "_")
			path := filepath.Join(t.TempDir(), "items.replica")
			tb, _, stop := durable(t, dsn, slot, path)
			waitReady(t, tb)
			stop()
			tc.meanwhile(t, db, slot, path)
			changeWhileDown(t, db, 1000)
			tb, src, _ := durable(t, dsn, slot, path)
			waitReady(t, tb)
			wantDiskStart(t, src, tc.reason)
			converged(t, db, tb)
		})
	}
}

// TestRestartFileCrashMidWrite: writes that die between the temporary
// file and the rename leave the last file whole, and the slot was told
// nothing past it: the next start resumes from that file, and the
// changes since (made while the writes failed) come from the slot.
func TestRestartFileCrashMidWrite(t *testing.T) {
	dsn, db := setup(t, 500)
	path := filepath.Join(t.TempDir(), "items.replica")
	tb, _, stop := durable(t, dsn, "disk_torn", path)
	waitReady(t, tb)
	stop()

	var crashes atomic.Int64
	undo := replica.CrashBeforeRename(func() error { crashes.Add(1); return errors.New("the process died here") })
	t.Cleanup(undo)
	tb, src, stop := durable(t, dsn, "disk_torn", path)
	waitReady(t, tb)
	wantDiskStart(t, src, "")
	changeWhileDown(t, db, 1000)
	converged(t, db, tb)
	testkit.EventuallyNil(t, 30*time.Second, "a write attempted after the changes", func() error {
		if crashes.Load() < 2 {
			return errors.New("no write yet")
		}
		return nil
	})
	stop()
	undo()
	if tmp, _ := filepath.Glob(path + ".tmp*"); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}

	changeWhileDown(t, db, 2000)
	tb, src, _ = durable(t, dsn, "disk_torn", path)
	waitReady(t, tb)
	wantDiskStart(t, src, "")
	converged(t, db, tb)
}

// diskChildEnv names what a child replica runs on: "dsn|slot|path".
const diskChildEnv = "HLAB_REPLICA_DISK_CHILD"

// runDiskChild runs a durable replica in this process, when it is the
// child of TestRestartAfterSIGKILL, until it is killed: it prints "ready"
// once it is, then its AppliedLSN every 20 ms. Its file is written once
// the tables are loaded, and not again for a minute: the changes it
// applies after are in no file.
func runDiskChild() (code int, child bool) {
	spec, ok := os.LookupEnv(diskChildEnv)
	if !ok {
		return 0, false
	}
	parts := strings.Split(spec, "|")
	tb := replica.NewTable[int32, item]("items")
	src, err := replica.NewPostgresSource(parts[0], []replica.Binding{bindItems(tb)}, replica.PostgresSlot(parts[1]),
		replica.PostgresPersist(parts[2], time.Minute), replica.PostgresStatusInterval(20*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	go src.Run(context.Background())
	if err := tb.WaitReady(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	fmt.Println("ready")
	for {
		fmt.Println(src.AppliedLSN())
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartAfterSIGKILL: a durable replica killed without Run
// returning leaves its last periodic file and a slot confirmed no
// further than it, though it applied (and told the server of) more; a
// new one resumes from that file.
func TestRestartAfterSIGKILL(t *testing.T) {
	dsn, db := setup(t, 2000)
	path := filepath.Join(t.TempDir(), "items.replica")
	t.Cleanup(func() { dropDurableSlot(t, db, "disk_killed") })
	cmd, out := testkit.StartSelf(t, diskChildEnv+"="+dsn+"|disk_killed|"+path)
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the child said %q, %v", lines.Text(), lines.Err())
	}
	fileWritten(t, path, time.Time{})
	// Changes the child applies, and sends the server status updates
	// after, but writes to no file.
	changeWhileDown(t, db, 3000)
	var target pglogrepl.LSN
	if err := db.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()`).Scan(&target); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		if applied, err := pglogrepl.ParseLSN(lines.Text()); err == nil && applied >= target {
			break
		}
	}
	time.Sleep(100 * time.Millisecond) // a few status updates
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitExit(t, cmd, 30*time.Second, "the killed child")

	changeWhileDown(t, db, 4000)
	tb, src, _ := durable(t, dsn, "disk_killed", path)
	waitReady(t, tb)
	wantDiskStart(t, src, "")
	converged(t, db, tb)
}

// TestPersistChecksItsSettings: durable mode needs a named slot and
// values gob writes whole.
func TestPersistChecksItsSettings(t *testing.T) {
	dir := t.TempDir()
	type hidden struct {
		ID   int32
		name string
	}
	for _, tc := range []struct {
		name string
		b    replica.Binding
		opts []replica.PostgresOption
		want string
	}{
		{"no slot", bindItems(replica.NewTable[int32, item]("items")), nil, "PostgresSlot"},
		{"unexported field", replica.Bind(replica.NewTable[int32, hidden]("items"), itemKey,
			func(replica.Row) (hidden, error) { return hidden{}, nil }), []replica.PostgresOption{replica.PostgresSlot("s")}, "unexported field name"},
		{"no directory", bindItems(replica.NewTable[int32, item]("items")), []replica.PostgresOption{replica.PostgresSlot("s"),
			replica.PostgresPersist(filepath.Join(dir, "missing", "f"), time.Second)}, "must exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]replica.PostgresOption{replica.PostgresPersist(filepath.Join(dir, "f"), time.Second)}, tc.opts...)
			_, err := replica.NewPostgresSource("postgres://localhost/x", []replica.Binding{tc.b}, opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one that says %q", err, tc.want)
			}
		})
	}
}

// TestRestartFileOfAnotherSlot: a file another slot's replica wrote (a
// volume moved between instances) is refused: its position means nothing
// to this slot.
func TestRestartFileOfAnotherSlot(t *testing.T) {
	dsn, db := setup(t, 500)
	path := filepath.Join(t.TempDir(), "items.replica")
	tb, _, stop := durable(t, dsn, "disk_first", path)
	waitReady(t, tb)
	stop()
	tb, src, _ := durable(t, dsn, "disk_second", path)
	waitReady(t, tb)
	wantDiskStart(t, src, replica.DiskOtherSource)
	converged(t, db, tb)
}
