package replicaexp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/replica"
)

// Ours, beyond the report: a replica restarted from its file
// (replica.PostgresPersist) against one started from a snapshot, on the
// same table. The durable replica starts once (a snapshot: there is no
// file yet), is stopped, the table changes while it is down, and it
// starts again from its file and slot; each row is the time from Run to
// Ready, then how many rows differ from Postgres.
const (
	restartSnapKey labresult.Key = "restart/postgres/from-snapshot"
	restartDiskKey labresult.Key = "restart/postgres/from-disk"
	restartTable                 = "restart_items"
	// restartChanges is how many rows each change made while the replica
	// is down touches (inserts, updates, deletes).
	restartChanges = 1000
)

// restartRows is the table's size: 200,000 rows in quick mode, a
// million in full, 20,000 in the tests' shortened runs.
func restartRows(o lab.Options) int {
	switch {
	case o.Mode == lab.Full:
		return 1_000_000
	case o.Short:
		return 20_000
	}
	return 200_000
}

func restartSnapLabel(o lab.Options) string {
	return fmt.Sprintf("ours: a replica's start from a snapshot, %d rows", restartRows(o))
}

func restartDiskLabel(o lab.Options) string {
	return fmt.Sprintf("ours: the same replica restarted from its file and slot (replica.PostgresPersist), %d rows, %d rows each inserted, updated and deleted while it was down",
		restartRows(o), restartChanges)
}

// The rows' own figures.
var (
	readyS = labresult.Metric{Name: "ready_s", Unit: "s", Better: labresult.Lower,
		Doc: "from the replica's Run to its tables Ready (loaded and caught up with the server)"}
	startedFromDisk = labresult.Metric{Name: "from_disk", Better: labresult.Neither,
		Doc: "1 when the replica's start came from its restart file, 0 when from a snapshot"}
)

var restartTargets = []labresult.Target{{
	Key:  "restart-from-disk",
	Text: "a durable replica restarted with its file and slot in place starts from the file (1), not from a snapshot (0)",
	Row:  restartDiskKey, Metric: startedFromDisk.Name, Bound: labresult.AtLeast(1),
}, {
	Key:  "restart-rows-identical",
	Text: "after a restart from its file, once Ready, the replica's rows are Postgres's: the changes made while it was down came from its slot, none lost or applied twice",
	Row:  restartDiskKey, Metric: labresult.RowsDiffering.Name, Bound: labresult.AtMost(0),
}, {
	Key:   "restart-ready-ratio",
	Text:  "time to Ready from the file over time to Ready from a snapshot, same table (shown)",
	Ratio: &labresult.Ratio{Num: restartDiskKey, Den: restartSnapKey, Metric: readyS.Name},
}}

// restartItem is a row of restartTable.
type restartItem struct {
	ID   int32
	Name string
	Qty  int32
}

func restartKey(r replica.Row) (int32, error) {
	id, ok := r["id"].(int32)
	if !ok {
		return 0, fmt.Errorf("id is %T, want int32", r["id"])
	}
	return id, nil
}

func restartDecode(r replica.Row) (restartItem, error) {
	name, _ := r["name"].(string)
	qty, ok := r["qty"].(int32)
	if !ok {
		return restartItem{}, fmt.Errorf("qty is %T, want int32", r["qty"])
	}
	return restartItem{ID: r["id"].(int32), Name: name, Qty: qty}, nil
}

// restart measures the two rows.
func (b *bench) restart(ctx context.Context) error {
	o := b.run.Opts
	n := restartRows(o)
	b.run.Progress.Step(fmt.Sprintf("restart from disk: %d rows", n), 15*time.Second)
	logf, err := os.Create(filepath.Join(o.WorkDir, name, "restart-replica.log"))
	if err != nil {
		return fmt.Errorf("restart: replica log: %w", err)
	}
	defer logf.Close()
	r := &restarter{slot: b.pg.Unique("lab_restart"), dsn: b.dsn, path: filepath.Join(o.WorkDir, name, "restart.replica"),
		log: slog.New(slog.NewTextHandler(logf, nil))}
	snap, disk, err := r.measure(ctx, n)
	if err != nil {
		return err
	}
	b.run.AddRow(snap)
	b.run.AddRow(disk)
	return nil
}

// measure seeds restartTable with n rows, starts the durable replica
// (from a snapshot: no file yet), stops it, changes the table, starts it
// again (from its file), and returns the two rows. It leaves neither the
// table nor the slot behind.
func (r *restarter) measure(ctx context.Context, n int) (snap, disk *labresult.Row, err error) {
	pool, err := pgxpool.New(ctx, r.dsn)
	if err != nil {
		return nil, nil, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS `+restartTable+`; CREATE TABLE `+restartTable+` (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
		INSERT INTO `+restartTable+` SELECT g, 'item ' || g, g FROM generate_series(1, `+fmt.Sprint(n)+`) g`); err != nil {
		return nil, nil, fmt.Errorf("restart: seed: %w", err)
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+restartTable)
	os.Remove(r.path)
	defer os.Remove(r.path)
	defer pool.Exec(context.WithoutCancel(ctx), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, r.slot)

	if snap, err = r.start(ctx, pool, restartSnapKey); err != nil {
		return nil, nil, err
	}
	// Committed synchronously: the server streams only flushed WAL, and
	// the replica is Ready once it has what was flushed when it connected.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, change := range []string{
			`SET LOCAL synchronous_commit = on`,
			`INSERT INTO ` + restartTable + ` SELECT g, 'new ' || g, g FROM generate_series($1::int + 1, $1::int + $2::int) g`,
			`UPDATE ` + restartTable + ` SET qty = qty + 1 WHERE id % ($1::int / $2::int) = 1`,
			`DELETE FROM ` + restartTable + ` WHERE id % ($1::int / $2::int) = 2`,
		} {
			args := []any{n, restartChanges}
			if !strings.Contains(change, "$1") {
				args = nil
			}
			if _, err := tx.Exec(ctx, change, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("restart: changes while the replica is down: %w", err)
	}
	if disk, err = r.start(ctx, pool, restartDiskKey); err != nil {
		return nil, nil, err
	}
	snap.AddNote("in the lab process, with no file yet: it copies the table; ready_s from Run to Ready, then rows compared with Postgres")
	disk.AddNote("it loads its file (%.0f MB) and streams the changes from its slot; ready_s from Run to Ready (caught up with the server), then rows compared with Postgres",
		r.fileMB)
	return snap, disk, nil
}

// restarter runs the durable replica of restartTable.
type restarter struct {
	slot, dsn, path string
	log             *slog.Logger
	fileMB          float64
}

// start runs the replica until it is Ready, compares its rows with the
// table's, stops it (which writes its file), and returns the row.
func (r *restarter) start(ctx context.Context, pool *pgxpool.Pool, key labresult.Key) (*labresult.Row, error) {
	tb := replica.NewTable[int32, restartItem]("public." + restartTable)
	src, err := replica.NewPostgresSource(r.dsn, []replica.Binding{replica.Bind(tb, restartKey, restartDecode)},
		replica.PostgresSlot(r.slot), replica.PostgresPersist(r.path, 10*time.Second), replica.PostgresLogger(r.log))
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	began := time.Now()
	go func() { src.Run(rctx); close(done) }()
	defer func() { stop(); <-done }()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := tb.WaitReady(wctx); err != nil {
		return nil, fmt.Errorf("restart: the replica did not get ready: %w", err)
	}
	ready := time.Since(began)
	_, refused := src.DiskStart()
	differing, err := restartDiff(ctx, pool, tb)
	if err != nil {
		return nil, err
	}
	row := lab.NewRow(key)
	row.Runs = 1
	row.Set(readyS, ready.Seconds())
	row.Set(startedFromDisk, float64(boolInt(refused == "")))
	row.Set(rowsCompared, float64(tb.Len()))
	d := int64(differing)
	row.RowsDiffering = &d
	if refused != "" && key == restartDiskKey {
		row.AddNote("the file was refused: %s", refused)
	}
	if st, err := os.Stat(r.path); err == nil {
		r.fileMB = float64(st.Size()) / (1 << 20)
	}
	return row, nil
}

// restartDiff counts the rows in which the replica and the table differ.
func restartDiff(ctx context.Context, pool *pgxpool.Pool, tb *replica.Table[int32, restartItem]) (int, error) {
	rows, err := pool.Query(ctx, `SELECT id, name, qty FROM `+restartTable)
	if err != nil {
		return 0, fmt.Errorf("restart: read the table: %w", err)
	}
	present, differing := 0, 0
	var it restartItem
	_, err = pgx.ForEachRow(rows, []any{&it.ID, &it.Name, &it.Qty}, func() error {
		got, ok := tb.Get(it.ID)
		if ok {
			present++
		}
		if !ok || got != it {
			differing++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("restart: read the table: %w", err)
	}
	return differing + tb.Len() - present, nil // and rows only the replica has
}
