package replicaexp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/replica"
)

// A replica under Postgres's own benchmark: pgbench's TPC-B-like
// transactions (an account, its teller and branch updated, a history row
// inserted, in one transaction) while a replica in the lab follows
// pgbench_accounts, _branches and _tellers. Once pgbench stops and the
// replica has caught up (its applied WAL position past the server's),
// every row is compared with Postgres.
const (
	pgbenchKey     labresult.Key = "pgbench/replica"
	pgbenchLabel                 = "pgbench TPC-B-like, 4 clients: replica of pgbench_accounts, _branches, _tellers"
	pgbenchDB                    = "pgbench"
	pgbenchScale                 = 2 // 200,000 accounts, 2 branches, 20 tellers
	pgbenchClients               = 4
	pgbenchThreads               = 2
)

// pgbenchTables are the tables the replica follows: each one's key and
// balance column (all have bid, and a blank-padded filler).
var pgbenchTables = []struct{ name, key, balance string }{
	{"pgbench_accounts", "aid", "abalance"},
	{"pgbench_branches", "bid", "bbalance"},
	{"pgbench_tellers", "tid", "tbalance"},
}

// pgbenchRow is a row of any of them, without its key.
type pgbenchRow struct {
	Bid, Balance int32
	Filler       string
}

// pgbench measures the row: pgbench -i, a replica loaded, pgbench -T for
// the run's duration, then rows_differing and the replica's lag.
func (b *bench) pgbench(ctx context.Context) error {
	row := lab.NewRow(pgbenchKey)
	row.Model, row.Connections, row.Runs = "pgbench", pgbenchClients, 1
	binDir, _, err := deps.FindPostgres()
	if err != nil {
		row.Note = fmt.Sprintf("not measured: pgbench comes with PostgreSQL's server package, not installed here (%v)", err)
		b.run.AddRow(row)
		return nil
	}
	pgbench := filepath.Join(binDir, "pgbench")
	b.run.Progress.Step("pgbench: initialize", 10*time.Second)
	if err := b.pg.CreateDatabase(ctx, pgbenchDB); err != nil {
		return err
	}
	dsn := b.pg.DSN(pgbenchDB)
	if _, err := runPgbench(ctx, pgbench, dsn, time.Minute, "-i", "-s", strconv.Itoa(pgbenchScale), "-I", "dtGvp", "-q"); err != nil {
		return err
	}
	r, err := b.followPgbench(ctx, dsn)
	if err != nil {
		return err
	}
	defer r.stop()

	start := time.Now()
	rec := newLagRecorder(start, start.Add(b.t.run+time.Minute))
	for _, t := range r.tables {
		t.OnChange(func(c replica.Change[int32, pgbenchRow]) {
			if c.Op == replica.Upsert {
				rec.observe(c.Commit, time.Now())
			}
		})
	}
	b.run.Progress.Step(fmt.Sprintf("pgbench: %d clients for %v", pgbenchClients, b.t.run), b.t.run)
	out, err := runPgbench(ctx, pgbench, dsn, b.t.run+time.Minute,
		"-c", strconv.Itoa(pgbenchClients), "-j", strconv.Itoa(pgbenchThreads), "-T", strconv.Itoa(int(b.t.run.Seconds())))
	if err != nil {
		return err
	}
	ended := time.Now()
	compared, differing, err := r.catchUpAndCompare(ctx, dsn)
	if err != nil {
		return err
	}
	pgbenchFigures(row, out, rec.snapshot(), r.src, compared, differing, time.Since(ended))
	row.AddNote("pgbench -s %d, -c %d -j %d -T %v (its TPC-B-like script, outside the quotas, against Postgres under its own %.0f-CPU quota): %.0f transactions, %.0f tps, %.0f failed; "+
		"a replica in the lab followed the three tables: commit to visible per change, %d changes; it caught up %.1f s after pgbench ended; then %d of %d rows differed from Postgres; %.0f decode errors, %.0f resyncs",
		pgbenchScale, pgbenchClients, pgbenchThreads, b.t.run, postgresCPU, row.Value(pgbenchTransactions), row.Value(pgbenchTPS), row.Value(pgbenchFailed),
		row.Requests, row.Value(caughtUpS), differing, compared, row.Value(decodeErrors), row.Value(resyncs))
	b.run.AddRow(row)
	return nil
}

// pgbenchReplica is a replica in the lab following pgbench's tables.
type pgbenchReplica struct {
	src    *replica.PostgresSource
	tables []*replica.Table[int32, pgbenchRow]
	stop   func()
}

// followPgbench starts a replica of pgbench's tables at dsn and waits
// until it has loaded them; its log goes to the experiment's directory.
func (b *bench) followPgbench(ctx context.Context, dsn string) (*pgbenchReplica, error) {
	logf, err := os.Create(filepath.Join(b.run.Opts.WorkDir, name, "pgbench-replica.log"))
	if err != nil {
		return nil, fmt.Errorf("pgbench: replica log: %w", err)
	}
	r := &pgbenchReplica{tables: make([]*replica.Table[int32, pgbenchRow], len(pgbenchTables))}
	bindings := make([]replica.Binding, len(pgbenchTables))
	for i, t := range pgbenchTables {
		r.tables[i] = replica.NewTable[int32, pgbenchRow](t.name)
		bindings[i] = replica.Bind(r.tables[i], func(row replica.Row) (int32, error) { return int32Col(row, t.key) },
			func(row replica.Row) (pgbenchRow, error) {
				var v pgbenchRow
				var err1, err2 error
				v.Bid, err1 = int32Col(row, "bid")
				v.Balance, err2 = int32Col(row, t.balance)
				v.Filler, _ = row["filler"].(string)
				return v, errors.Join(err1, err2)
			})
	}
	r.src, err = replica.NewPostgresSource(dsn, bindings, replica.PostgresSlot(b.pg.Unique("lab_pgbench")),
		replica.PostgresPublication("lab_pgbench"), replica.PostgresLogger(slog.New(slog.NewTextHandler(logf, nil))))
	if err != nil {
		logf.Close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.src.Run(rctx); close(done) }()
	r.stop = func() { cancel(); <-done; logf.Close() }
	b.run.Progress.Step("pgbench: load the replica", 5*time.Second)
	if err := waitFor(ctx, time.Minute, r.ready); err != nil {
		r.stop()
		return nil, fmt.Errorf("pgbench: the replica did not load: %w (%v)", err, r.src.Err())
	}
	return r, nil
}

func (r *pgbenchReplica) ready() bool {
	for _, t := range r.tables {
		if !t.Ready() {
			return false
		}
	}
	return true
}

// catchUpAndCompare waits until the replica has applied the server's last
// WAL position, then compares every row of the three tables with it.
func (r *pgbenchReplica) catchUpAndCompare(ctx context.Context, dsn string) (compared, differing int64, err error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	var pos string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&pos); err != nil {
		return 0, 0, err
	}
	end, err := pglogrepl.ParseLSN(pos)
	if err != nil {
		return 0, 0, err
	}
	if err := waitFor(ctx, time.Minute, func() bool { return r.ready() && r.src.AppliedLSN() >= end }); err != nil {
		return 0, 0, fmt.Errorf("pgbench: the replica did not catch up with %s: %w (%v)", pos, err, r.src.Err())
	}
	for i, t := range pgbenchTables {
		n, d, err := comparePgbench(ctx, pool, t.name, t.key, t.balance, r.tables[i])
		if err != nil {
			return 0, 0, err
		}
		compared, differing = compared+n, differing+d
	}
	return compared, differing, nil
}

// pgbenchFigures fills the row: the replica's lag per change (h), what
// pgbench printed (out), and the comparison.
func pgbenchFigures(row *labresult.Row, out string, h *hdrhistogram.Histogram, src *replica.PostgresSource, compared, differing int64, caughtUp time.Duration) {
	lag := hdrRow(pgbenchKey, h)
	row.Requests, row.MeanMS, row.P50MS, row.P90MS, row.P95MS, row.P99MS, row.P999MS, row.MaxMS, row.Percentiles =
		lag.Requests, lag.MeanMS, lag.P50MS, lag.P90MS, lag.P95MS, lag.P99MS, lag.P999MS, lag.MaxMS, lag.Percentiles
	row.RowsDiffering = &differing
	row.Set(pgbenchTPS, pgbenchFigure(out, `tps = ([0-9.]+) \(without`))
	row.Set(pgbenchTransactions, pgbenchFigure(out, `actually processed: ([0-9]+)`))
	row.Set(pgbenchFailed, pgbenchFigure(out, `failed transactions: ([0-9]+)`))
	row.Set(rowsCompared, float64(compared))
	row.Set(caughtUpS, caughtUp.Seconds())
	if row.P99MS != nil {
		row.Set(lagP99, *row.P99MS)
	}
	row.Set(decodeErrors, float64(src.DecodeErrors()))
	row.Set(resyncs, float64(src.Resyncs()))
}

func int32Col(r replica.Row, col string) (int32, error) {
	v, ok := r[col].(int32)
	if !ok {
		return 0, fmt.Errorf("%s is %T, want int32", col, r[col])
	}
	return v, nil
}

// runPgbench runs pgbench with args against dsn, its password passed in
// the environment rather than on the command line, and returns its
// output.
func runPgbench(ctx context.Context, pgbench, dsn string, limit time.Duration, args ...string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("pgbench: %w", err)
	}
	env := os.Environ()
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw)
		}
		u.User = url.User(u.User.Username())
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgbench, append(args, u.String())...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgbench %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return string(out), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "; ")
}

// pgbenchFigure is the number pattern's group finds in pgbench's output
// (0 if it is not there).
func pgbenchFigure(out, pattern string) float64 {
	m := regexp.MustCompile(pattern).FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// comparePgbench compares table with the replica tb row by row: it
// returns the rows compared (the table's) and those that differ, are
// missing from the replica, or are in the replica only.
func comparePgbench(ctx context.Context, pool *pgxpool.Pool, table, key, balance string, tb *replica.Table[int32, pgbenchRow]) (compared, differing int64, err error) {
	rows, err := pool.Query(ctx, fmt.Sprintf("SELECT %s, bid, %s, coalesce(filler, '') FROM %s", key, balance, table))
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	var present int64
	for rows.Next() {
		var k int32
		var want pgbenchRow
		if err := rows.Scan(&k, &want.Bid, &want.Balance, &want.Filler); err != nil {
			return 0, 0, err
		}
		compared++
		got, ok := tb.Get(k)
		if ok {
			present++
		}
		if !ok || got != want {
			differing++
		}
	}
	// Rows only the replica has.
	return compared, differing + int64(tb.Len()) - present, rows.Err()
}
