// Package nosql is report A3's experiment: the activity service (hlab
// serve activities) writing report A3's activity per request into a real
// Postgres and into a real Cassandra, each database under a 1-CPU quota
// and the service at 1 CPU like the report's containers, under wrk-like
// closed-model load with 1 and 12 connections; then, what a user would
// try before switching databases (report C's batching), both stores again
// with --batch at 12 connections.
//
// Durability is made comparable: each database acknowledges a write only
// once its log is on disk. Postgres runs with fsync and synchronous_commit
// on (a commit waits for its WAL flush; concurrent commits share one),
// Cassandra with commitlog_sync: batch (a write waits for the commit-log
// sync; concurrent writes share one). Cassandra's default, periodic
// (acknowledge at once, sync every 10 s), matches Postgres with
// synchronous_commit off instead. Both settings are in the result's env.
//
// Two more rows look for why the report saw what it saw: Postgres through
// Go's database/sql with no pool limits set (the report's app: database/sql
// then keeps 2 idle connections and opens a new one for most requests at
// 12 clients), and, in --full, a second Cassandra node with its default,
// periodic commit log.
//
// Each database warms up before the first row until its throughput stops
// climbing: the JVM under Cassandra compiles its hot paths for tens of
// seconds on one throttled core, and a cold Cassandra measures the JIT,
// not the database. After each row the experiment counts the rows in the
// database and compares them with the writes the load generator saw
// acknowledged (2xx, warm-up included): each service writes to a table of
// its own (a Postgres database, a Cassandra keyspace), truncated before
// its row, and a difference fails the experiment.
//
// Both databases and every service run for the whole experiment, and the
// rows measured together take turns run by run (lab.Interleaved), so a
// burst of load from elsewhere on a shared machine weighs on Postgres and
// Cassandra alike.
package nosql

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/activities"
	"github.com/highload-lab/hlab/loadgen"
)

// The report's setup: app and database at 1 CPU each.
const (
	appCPU   = 1.0
	appMemMB = 512
	dbCPU    = 1.0
	heapMB   = 1024 // Cassandra's -Xmx: the most the issue allows
	poolMax  = activities.DefaultPoolMax
	manyConn = 12
)

// Row labels; the claim refers to them.
const (
	pg1     = "postgres, 1 connection"
	pg12    = "postgres, 12 connections"
	cas1    = "cassandra, 1 connection"
	cas12   = "cassandra, 12 connections"
	pgB1    = "postgres --batch, 1 connection"
	casB1   = "cassandra --batch, 1 connection"
	pgB12   = "postgres --batch, 12 connections"
	casB12  = "cassandra --batch, 12 connections"
	pgSQL12 = "postgres via database/sql defaults (report's app?), 12 connections"
	casP12  = "cassandra, commitlog periodic (its default), 12 connections"
	reportX = 1213.0 / 323.0 // report A3's Cassandra/Postgres RPS at 12 connections
)

// Experiment is report A3's SQL-vs-NoSQL experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

func (*Experiment) Name() string { return "nosql" }

func (*Experiment) Title() string {
	return "SQL vs NoSQL for write-heavy activity data: Postgres and Cassandra, real, 1 CPU each, with and without batching (report A3)"
}

func (*Experiment) Claims() []lab.Claim {
	return []lab.Claim{{
		Text:      fmt.Sprintf("Cassandra serves >= 2x the requests per second of Postgres at 12 connections (report A3: %.1fx)", reportX),
		Metric:    "rps",
		Numerator: cas12, Denominator: pg12,
		AtLeast: 2,
	}}
}

// warmup bounds the warm-up of each database: load at 12 connections in
// windows of window, until at least minRequests were answered and two
// windows in a row failed to beat the best earlier one by 10%, or max.
// The request floor is for the JIT: the JVM compiles a method to its top
// tier after ~10-15k calls, and on one throttled core its compiler
// competes with the requests, so on a busy machine throughput can stall
// for a window or two before it climbs again.
type warmup struct {
	window, max time.Duration
	minRequests int64
}

// timing returns each measured run's duration and the databases' warm-up.
func timing(o lab.Options) (time.Duration, warmup) {
	if o.Mode == lab.Full {
		return o.RunDuration(5*time.Second, 0), warmup{5 * time.Second, 3 * time.Minute, 100_000} // the report's wrk ran 5 s
	}
	return o.RunDuration(5*time.Second, 2*time.Second), warmup{3 * time.Second, time.Minute, 30_000}
}

// The services: each store, with and without --batch, and Postgres
// through database/sql with no limits set, each writing to a table of its
// own (a Postgres database or a Cassandra keyspace); in --full also one
// on a second Cassandra node with the default commit log.
const (
	svcPG      = "postgres"
	svcPGBatch = "postgres --batch"
	svcPGSQL   = "postgres --pg-pool sql-defaults"
	svcCas     = "cassandra"
	svcCasB    = "cassandra --batch"
	svcCasP    = "cassandra (commitlog periodic)"
)

// Databases.
const (
	dbPG       = "postgres"
	dbCas      = "cassandra"
	dbCasPerio = "cassandra-periodic"
)

type serviceSpec struct {
	key   string
	db    string
	args  []string
	table string // Postgres database or Cassandra keyspace
	full  bool   // --full only
}

var serviceSpecs = []serviceSpec{
	{key: svcPG, db: dbPG, args: []string{"--pool-max", strconv.Itoa(poolMax)}, table: "activities"},
	{key: svcCas, db: dbCas, table: activities.DefaultKeyspace},
	{key: svcPGBatch, db: dbPG, args: []string{"--pool-max", strconv.Itoa(poolMax), "--batch"}, table: "activities_batch"},
	{key: svcCasB, db: dbCas, args: []string{"--batch"}, table: activities.DefaultKeyspace + "_batch"},
	{key: svcPGSQL, db: dbPG, args: []string{"--pg-pool", activities.PoolSQLDefaults}, table: "activities_sql_defaults"},
	{key: svcCasP, db: dbCasPerio, table: activities.DefaultKeyspace, full: true},
}

// row is one row to measure.
type row struct {
	label string
	svc   string // a serviceSpec key
	conns int
	ref   *lab.Ref
}

func ref(rps, meanMS float64) *lab.Ref { return &lab.Ref{RPS: lab.F(rps), MeanMS: lab.F(meanMS)} }

// sets returns the rows, in sets measured together: rows of a set take
// turns run by run, and each row of a set writes to a table of its own.
func sets(o lab.Options) [][]row {
	one := []row{
		{pg1, svcPG, 1, ref(521, 2.50)},
		{cas1, svcCas, 1, ref(355, 2.81)},
	}
	many := []row{
		{pg12, svcPG, manyConn, ref(323, 42.74)},
		{cas12, svcCas, manyConn, ref(1213, 18.74)},
		{pgB12, svcPGBatch, manyConn, nil},
		{casB12, svcCasB, manyConn, nil},
		{pgSQL12, svcPGSQL, manyConn, nil},
	}
	if o.Mode == lab.Full {
		one = append(one, row{pgB1, svcPGBatch, 1, nil}, row{casB1, svcCasB, 1, nil})
		many = append(many, row{casP12, svcCasP, manyConn, nil})
	}
	return [][]row{one, many}
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	runDur, w := timing(o)
	d := 3*time.Second + 15*time.Second + 8*time.Second // Postgres, Cassandra, the services
	d += 12 * w.window                                  // Cassandra's warm-up, typically
	for _, set := range sets(o) {
		d += time.Duration(len(set)) * (o.Warmup() + time.Duration(o.Repeats())*runDur + 500*time.Millisecond)
	}
	return d
}

// table is where one service writes: a Postgres database or a Cassandra
// keyspace, holding activities.Table.
type table struct {
	name     string
	count    func(ctx context.Context) (int64, error)
	truncate func(ctx context.Context) error
}

// service is one running "hlab serve activities" and its table.
type service struct {
	svc *lab.Service
	tab table
	db  func() *sandbox.Process // the database's process
}

// databases are the running databases.
type databases struct {
	pg  *deps.Postgres
	cas map[string]*deps.Cassandra // by db name
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	begin := time.Now()
	runDur, warm := timing(run.Opts)
	dir := filepath.Join(run.Opts.WorkDir, e.Name())
	loadStart := loadAverage()
	defer func() {
		// Other processes on the machine skew every figure here: say how busy it was.
		run.SetEnv("load_average", fmt.Sprintf("%s at the start, %s at the end (1 min; %d CPUs)", loadStart, loadAverage(), runtime.NumCPU()))
	}()
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("app", fmt.Sprintf("hlab serve activities, %.0f CPU, %d MB each (GOMAXPROCS follows the quota); pgx pool of at most %d (or database/sql with no limits set, one row); gocql %d connections, consistency %s; timeout %v",
		appCPU, appMemMB, poolMax, activities.DefaultCassandraConns, activities.DefaultConsistency, activities.DefaultTimeout))
	run.SetEnv("load", fmt.Sprintf("hlab load, closed model (wrk -cN), GET /handle: one random activity inserted per request (report A3); %d runs of %v after a %v warm-up per row, rows of a set interleaved run by run",
		run.Opts.Repeats(), runDur, run.Opts.Warmup()))
	run.SetEnv("schema", "postgres: activities(id uuid primary key, user_id uuid, ts timestamptz, data jsonb) + index (user_id, ts desc) for the history read; "+
		"cassandra: keyspace RF 1, activities(user_id uuid, ts timestamp, id uuid, data text, primary key ((user_id), ts, id)) clustered ts desc")
	run.SetEnv("batch", fmt.Sprintf("--batch: sealed at %d rows, %v after its first row, or at once when a flusher is free; %d flushers; postgres: COPY, one transaction per batch; cassandra: an unlogged batch per partition (user), partitions written concurrently",
		activities.DefaultBatchRows, activities.DefaultBatchDelay, activities.DefaultBatchFlushers))

	dbs, stopDBs, err := e.startDatabases(ctx, run, dir)
	defer stopDBs()
	if err != nil {
		return err
	}
	services, closeAll, err := e.startServices(ctx, run, dbs)
	defer closeAll()
	if err != nil {
		return err
	}
	if err := e.warmUp(ctx, run, services, warm); err != nil {
		return err
	}

	var mismatches []string
	rows := map[string]*lab.Row{}
	for _, set := range sets(run.Opts) {
		ms := make([]lab.Measurement, len(set))
		acked := make([]int64, len(set))
		for i, r := range set {
			s := services[r.svc]
			dbProc := s.db()
			if dbProc == nil {
				return fmt.Errorf("nosql: %s: its database is not running", r.label)
			}
			if err := s.tab.truncate(ctx); err != nil {
				return fmt.Errorf("nosql: %s: truncate %s: %w", r.label, s.tab.name, err)
			}
			ms[i] = lab.Measurement{
				Label: r.label, URL: s.svc.URL("/handle"), Ref: r.ref,
				Procs: []*sandbox.Process{s.svc.Proc, dbProc},
				Load:  []loadgen.Option{loadgen.Connections(r.conns)},
				// Warmed up below, so that its acknowledged writes are counted.
				Duration: runDur, NoWarmup: true,
			}
			if r.svc == svcPGBatch || r.svc == svcCasB {
				metrics := s.svc.URL("/metrics")
				ms[i].Counters = []lab.Counter{
					{Key: "batch_rows", URL: metrics, Name: "activities_batch_rows_sum"},
					{Key: "batches", URL: metrics, Name: "activities_batch_rows_count"},
				}
			}
		}
		for i, m := range ms {
			run.Progress.Step(m.Label+": warm-up", run.Opts.Warmup())
			res, err := loadgen.Run(ctx, m.URL, append(m.Load, loadgen.Duration(run.Opts.Warmup()))...)
			if err != nil {
				return fmt.Errorf("nosql: %s warm-up: %w", m.Label, err)
			}
			for code, n := range res.StatusCodes {
				if code >= 200 && code < 300 {
					acked[i] += n
				}
			}
		}
		measured, err := run.MeasureInterleaved(ctx, lab.Interleaved{Measurements: ms})
		if err != nil {
			return err
		}
		for i, row := range measured {
			r := set[i]
			s := services[r.svc]
			for code, n := range row.StatusCodes {
				if c, err := strconv.Atoi(code); err == nil && c >= 200 && c < 300 {
					acked[i] += n
				}
			}
			run.Progress.Step(r.label+": count rows", time.Second)
			stored, err := s.tab.count(ctx)
			if err != nil {
				return fmt.Errorf("nosql: %s: count the rows in %s: %w", r.label, s.tab.name, err)
			}
			row.Acked, row.Stored = &acked[i], &stored
			row.Note = fmt.Sprintf("acked %d, stored %d", acked[i], stored)
			if acked[i] == stored {
				row.Note += ": equal"
			} else {
				row.Note += fmt.Sprintf(": MISMATCH (%+d)", stored-acked[i])
				mismatches = append(mismatches, fmt.Sprintf("%s: %d writes acknowledged, %d rows stored", r.label, acked[i], stored))
			}
			if n := row.Figures["batches"]; n > 0 {
				row.Figures["mean_batch_rows"] = row.Figures["batch_rows"] / n
				row.Note += fmt.Sprintf("; %.1f rows per batch on average", row.Figures["mean_batch_rows"])
			}
			rows[r.label] = row
			run.AddRow(row)
		}
	}

	ratio := func(a, b string) string {
		x, y := rows[a], rows[b]
		if x == nil || y == nil || x.RPS == nil || y.RPS == nil || *y.RPS == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2fx (%.0f vs %.0f req/s)", *x.RPS / *y.RPS, *x.RPS, *y.RPS)
	}
	run.Note("cassandra/postgres: %s at 1 connection (report: %.2fx), %s at 12 connections (report: %.2fx)",
		ratio(cas1, pg1), 355.0/521.0, ratio(cas12, pg12), reportX)
	run.Note("what --batch buys at 12 connections: postgres %s, cassandra %s; batched postgres against plain cassandra: %s",
		ratio(pgB12, pg12), ratio(casB12, cas12), ratio(pgB12, cas12))
	why := fmt.Sprintf("report A3's Postgres app set no pool limits: Go's database/sql then keeps 2 idle connections, so with 12 clients most requests open a new connection (a new Postgres backend process). "+
		"That app here: %s of the bounded pool's; cassandra against it: %s (report: %.2fx)", ratio(pgSQL12, pg12), ratio(cas12, pgSQL12), reportX)
	if rows[casP12] != nil {
		why += fmt.Sprintf(". Cassandra with its default commit log (periodic, not durable at acknowledgement): %s of the durable node's; against durable postgres through database/sql defaults: %s",
			ratio(casP12, cas12), ratio(casP12, pgSQL12))
	} else {
		why += ". --full adds Cassandra with its default, periodic commit log"
	}
	run.Note("%s", why)
	if d := time.Since(begin); run.Opts.Mode == lab.Quick && d > 100*time.Second {
		run.Note("quick mode took %.0f s, over its 90 s aim: Cassandra's start and its JIT warm-up (see env) are fixed costs a shorter run cannot remove without measuring a cold JVM", d.Seconds())
	}
	if len(mismatches) > 0 {
		return fmt.Errorf("nosql: acknowledged writes and stored rows differ: %s", strings.Join(mismatches, "; "))
	}
	return nil
}

// startDatabases starts Postgres and Cassandra (and in --full a second
// Cassandra with the default commit log), each at 1 CPU, and records
// their settings. stop stops what was started (also after an error),
// keeping their logs in dir.
func (e *Experiment) startDatabases(ctx context.Context, run *lab.Run, dir string) (*databases, func(), error) {
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	dbs := &databases{cas: map[string]*deps.Cassandra{}}

	// Postgres, durable.
	run.Progress.Step("postgres: start", 3*time.Second)
	pg, err := deps.StartPostgres(ctx, run.Sandbox, deps.PostgresConfig{Durable: true, CPU: dbCPU})
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() {
		keepLog(filepath.Join(pg.Dir, "postgres.log"), filepath.Join(dir, "postgres.log"))
		pg.Stop()
	})
	dbs.pg = pg
	run.SetEnv("postgres", fmt.Sprintf("%s, %.0f CPU (quota), no memory limit, durable", pg.Kind, dbCPU))
	run.SetEnv("postgres_settings", settings(pg.Settings, "port", "unix_socket_directories", "listen_addresses")+"; others at their defaults (shared_buffers 128MB)")

	// Cassandra: the durable node, and in --full the default one, started
	// at once (starting is not measured).
	nodes := []string{dbCas}
	if run.Opts.Mode == lab.Full {
		nodes = append(nodes, dbCasPerio)
	}
	run.Progress.Step(fmt.Sprintf("cassandra: start %d node(s) (the JVM takes 10-30 s)", len(nodes)), 20*time.Second)
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
	)
	for _, name := range nodes {
		wg.Go(func() {
			c, err := deps.StartCassandra(ctx, run.Sandbox, deps.CassandraConfig{Durable: name == dbCas, CPU: dbCPU, HeapMB: heapMB})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("nosql: %s: %w", name, err)
				}
				return
			}
			dbs.cas[name] = c
			stops = append(stops, func() {
				keepLog(filepath.Join(c.Dir, "system.log"), filepath.Join(dir, name+"-system.log"))
				c.Stop()
			})
		})
	}
	wg.Wait()
	if first != nil {
		return nil, stop, first
	}
	java := "java"
	if _, v, err := deps.FindJava(); err == nil {
		java += " " + v
	}
	for _, name := range nodes {
		c := dbs.cas[name]
		rss := "?"
		if p := c.Proc(); p != nil {
			if s := p.Samples(); len(s) > 0 {
				rss = fmt.Sprintf("%.0f MB", s[len(s)-1].RSSMB)
			}
		}
		run.SetEnv(name, fmt.Sprintf("%s on %s (Maven Central jars, JVM flags of its jvm17-server.options), %.0f CPU (quota), -Xms/-Xmx %dm, no memory limit; started in %.1f s, RSS %s after start",
			c.Kind, java, dbCPU, c.HeapMB, c.Started.Seconds(), rss))
		run.SetEnv(name+"_settings", settings(c.Settings)+"; single node, num_tokens 1, others at their defaults")
	}
	cas := dbs.cas[dbCas]
	run.SetEnv("durability", fmt.Sprintf("comparable: each acknowledges a write only once its log is fsynced, concurrent writes sharing a sync: postgres fsync=%s, synchronous_commit=%s; cassandra commitlog_sync=%s",
		pg.Settings["fsync"], pg.Settings["synchronous_commit"], cas.Settings["commitlog_sync"]))
	run.Note("durability: Postgres runs with fsync=on and synchronous_commit=on, Cassandra with commitlog_sync: batch: both answer a write only once their log is on disk, and both let concurrent writes share one sync. " +
		"Cassandra's default (periodic: answer at once, sync every 10 s) compares with Postgres's synchronous_commit=off, not with its durable default; the report does not say which ran")
	return dbs, stop, nil
}

// warmUp loads each database's plain service at 12 connections, all
// databases at once (warming is not measured), each until its throughput
// stops climbing, and records how long that took.
func (e *Experiment) warmUp(ctx context.Context, run *lab.Run, services map[string]*service, w warmup) error {
	warmed := []string{svcPG, svcCas}
	if services[svcCasP] != nil {
		warmed = append(warmed, svcCasP)
	}
	run.Progress.Step(fmt.Sprintf("warm-up: %s, until throughput stops climbing (%v windows, at most %v)", strings.Join(warmed, ", "), w.window, w.max), 12*w.window)
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		first   error
		summary []string
	)
	for _, key := range warmed {
		wg.Go(func() {
			start := time.Now()
			var (
				rates []float64
				sent  int64
			)
			best, flat := 0.0, 0
			for time.Since(start) < w.max && ctx.Err() == nil {
				res, err := loadgen.Run(ctx, services[key].svc.URL("/handle"), loadgen.Connections(manyConn), loadgen.Duration(w.window))
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("nosql: %s warm-up: %w", key, err)
					}
					mu.Unlock()
					return
				}
				rates = append(rates, res.RPS)
				sent += res.Requests
				if res.RPS < 1.1*best {
					flat++
				} else {
					flat = 0
				}
				best = max(best, res.RPS)
				if flat >= 2 && sent >= w.minRequests {
					break
				}
			}
			parts := make([]string, len(rates))
			for i, r := range rates {
				parts[i] = strconv.FormatFloat(r, 'f', 0, 64)
			}
			mu.Lock()
			summary = append(summary, fmt.Sprintf("%s %.0f s, %d requests (req/s per %v window: %s)", key, time.Since(start).Seconds(), sent, w.window, strings.Join(parts, " ")))
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Strings(summary)
	run.SetEnv("warmup", fmt.Sprintf("at 12 connections, all databases at once, each until it answered >= %d requests and two windows in a row gained < 10%% on the best (at most %v): %s",
		w.minRequests, w.max, strings.Join(summary, "; ")))
	return first
}

// startServices starts the services of serviceSpecs, each on a table of
// its own, and the lab's connections that count and truncate those
// tables (outside the quotas). closeAll stops everything started, also
// after an error.
func (e *Experiment) startServices(ctx context.Context, run *lab.Run, dbs *databases) (map[string]*service, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	out := map[string]*service{}
	sessions := map[string]*gocql.Session{}
	for name, c := range dbs.cas {
		cl := c.NewCluster()
		cl.Timeout = 2 * time.Minute // a full-table COUNT(*) on one throttled core
		cl.Consistency = gocql.All
		session, err := cl.CreateSession()
		if err != nil {
			return nil, closeAll, fmt.Errorf("nosql: the lab's session to %s: %w", name, err)
		}
		closers = append(closers, func() { deps.CloseCassandraSession(session) })
		sessions[name] = session
	}

	for _, sp := range serviceSpecs {
		if sp.full && run.Opts.Mode != lab.Full {
			continue
		}
		var (
			args []string
			s    = &service{}
		)
		if sp.db == dbPG {
			pg := dbs.pg
			if err := pg.CreateDatabase(ctx, sp.table); err != nil {
				return nil, closeAll, err
			}
			args = []string{"--store", activities.Postgres, "--dsn", pg.DSN(sp.table)}
			conn, err := pgx.Connect(ctx, pg.DSN(sp.table))
			if err != nil {
				return nil, closeAll, fmt.Errorf("nosql: %w", err)
			}
			closers = append(closers, func() { conn.Close(context.Background()) })
			s.db = pg.Proc
			s.tab = table{
				name: "postgres database " + sp.table,
				count: func(ctx context.Context) (n int64, err error) {
					err = conn.QueryRow(ctx, "SELECT count(*) FROM "+activities.Table).Scan(&n)
					return n, err
				},
				truncate: func(ctx context.Context) error {
					_, err := conn.Exec(ctx, "TRUNCATE "+activities.Table)
					return err
				},
			}
		} else {
			c, session := dbs.cas[sp.db], sessions[sp.db]
			args = []string{"--store", activities.Cassandra, "--cassandra", c.Addr, "--keyspace", sp.table, "--consistency", activities.DefaultConsistency}
			qualified := sp.table + "." + activities.Table
			s.db = c.Proc
			s.tab = table{
				name: sp.db + " table " + qualified,
				count: func(ctx context.Context) (n int64, err error) {
					err = session.Query("SELECT COUNT(*) FROM "+qualified).ScanContext(ctx, &n)
					return n, err
				},
				truncate: func(ctx context.Context) error {
					return session.Query("TRUNCATE " + qualified).ExecContext(ctx)
				},
			}
		}
		args = append(args, sp.args...)
		run.Progress.Step("start hlab serve activities: "+sp.key, 2*time.Second)
		svc, err := run.StartService(ctx, "activities", appCPU, appMemMB, args...)
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, func() { svc.Stop() })
		s.svc = svc
		out[sp.key] = s
	}
	return out, closeAll, nil
}

// settings renders server settings for the environment, without the
// ones that only locate the server.
func settings(s map[string]string, skip ...string) string {
	var parts []string
	for k, v := range s {
		if !slices.Contains(skip, k) {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// keepLog copies a database's log into the lab's log directory before the
// database's temporary directory goes (best effort).
func keepLog(from, to string) {
	src, err := os.Open(from)
	if err != nil {
		return
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return
	}
	defer dst.Close()
	io.Copy(dst, src)
}

// loadAverage is the 1-minute load average, "?" where unknown.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
