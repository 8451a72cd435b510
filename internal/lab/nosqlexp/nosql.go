// Package nosql is report A3's experiment: the activity service (hlab
// serve activities) writing report A3's activity per request into a real
// Postgres and into a real Cassandra, each database under a 1-CPU quota
// and the service at 1 CPU like the report's containers, under wrk-like
// closed-model load with 1 and 12 connections.
//
// The report's setup first. Its Cassandra was the bitnami 4.0 image with
// its defaults, so its commit log was the default, periodic one: a write
// is acknowledged before its commit-log fsync (synced every 10 s). Its
// Postgres app used Go's database/sql with sql.Open and no pool settings:
// database/sql then keeps 2 idle connections, so with 12 clients most
// requests open a new connection, a new Postgres backend process. Its
// Postgres ran with its defaults: durable, a commit waits for its WAL
// flush. The first claim compares those, as the report did.
//
// Then fairer conditions, the second claim: both durable at
// acknowledgement (Cassandra with commitlog_sync: batch, a write waits for
// the commit-log sync, concurrent writes sharing one; Postgres as before,
// concurrent commits sharing one WAL flush), and the Postgres app with a
// bounded pgx pool. Beside them, what a user would try before switching
// databases (report C's batching): both stores with --batch.
//
// Each Cassandra node warms up before its rows until its throughput stops
// climbing: the JVM compiles its hot paths for tens of seconds on one
// throttled core, and a cold Cassandra measures the JIT, not the
// database. After each set of rows the experiment counts the rows in the
// database and compares them with the writes the load generator saw
// acknowledged (2xx): each service writes to a table of its own (a
// Postgres database, a Cassandra keyspace), truncated before its set, and
// a difference makes the claims on that row INVALID.
//
// Both databases and every service run for the whole experiment; the
// claims' four rows take turns, round by round, their order alternating.
package nosqlexp

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	heapMB   = 1024 // Cassandra's -Xmx: the report's
	poolMax  = activities.DefaultPoolMax
	manyConn = 12
)

// Row labels; the claims refer to them.
const (
	pgSQL1  = "postgres, database/sql defaults (the report's app), 1 connection"
	casP1   = "cassandra, periodic commit log (the report's default), 1 connection"
	pgSQL12 = "postgres, database/sql defaults (the report's app), 12 connections"
	casP12  = "cassandra, periodic commit log (the report's default), 12 connections"
	pg1     = "postgres, bounded pgx pool, 1 connection"
	cas1    = "cassandra, durable commit log, 1 connection"
	pg12    = "postgres, bounded pgx pool, 12 connections"
	cas12   = "cassandra, durable commit log, 12 connections"
	pgB1    = "postgres --batch, 1 connection"
	casB1   = "cassandra --batch (durable), 1 connection"
	pgB12   = "postgres --batch, 12 connections"
	casB12  = "cassandra --batch (durable), 12 connections"
	reportX = 1213.0 / 323.0 // report A3's Cassandra/Postgres RPS at 12 connections
)

// Experiment is report A3's SQL-vs-NoSQL experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

func (*Experiment) Name() string { return "nosql" }

// Dependencies: Postgres and Cassandra (hlab lab --postgres, --cassandra).
func (*Experiment) Dependencies() []string { return []string{lab.DepPostgres, lab.DepCassandra} }

func (*Experiment) Title() string {
	return "SQL vs NoSQL for write-heavy activity data: Postgres and Cassandra, real, 1 CPU each, the report's setup and a durable one (report A3)"
}

func (*Experiment) Claims() []lab.Claim {
	return []lab.Claim{{
		Text:      "Cassandra with its default commit log (periodic: a write is acknowledged before its fsync) serves >= 2x the requests per second of Postgres through the report's app (database/sql, no pool settings), at 12 connections",
		Metric:    "rps",
		Numerator: casP12, Denominator: pgSQL12,
		AtLeast: 2,
		Report:  fmt.Sprintf("1213 / 323 = %.2f", reportX),
	}, {
		Text:      "with both durable at acknowledgement (Cassandra's batch commit log) and the Postgres app's pool bounded (pgx), Cassandra serves >= 2x the requests per second of Postgres, at 12 connections",
		Metric:    "rps",
		Numerator: cas12, Denominator: pg12,
		AtLeast: 2,
		Report:  "not measured: the report ran the defaults above",
	}}
}

// runDur is each measured run's duration: the report's wrk ran 5 s.
const runDur = 5 * time.Second

// The services, each writing to a table of its own (a Postgres database
// or a Cassandra keyspace).
const (
	svcPGSQL   = "postgres --pg-pool sql-defaults"
	svcCasP    = "cassandra (commitlog periodic)"
	svcPG      = "postgres"
	svcCas     = "cassandra (commitlog batch)"
	svcPGBatch = "postgres --batch"
	svcCasB    = "cassandra --batch"
)

// Databases.
const (
	dbPG       = "postgres"
	dbCas      = "cassandra"
	dbCasPerio = "cassandra-periodic"
)

type serviceSpec struct {
	key string
	db  string
	// cfg is what the service changes from the defaults; the database it
	// reaches (Store, DSN or Cassandra, Keyspace) is filled in at start.
	cfg   activities.Config
	table string // Postgres database or Cassandra keyspace
}

var serviceSpecs = []serviceSpec{
	{key: svcPGSQL, db: dbPG, cfg: activities.Config{PGPool: activities.PoolSQLDefaults}, table: "activities_sql_defaults"},
	{key: svcCasP, db: dbCasPerio, table: activities.DefaultKeyspace},
	{key: svcPG, db: dbPG, cfg: activities.Config{PoolMax: poolMax}, table: "activities"},
	{key: svcCas, db: dbCas, table: activities.DefaultKeyspace},
	{key: svcPGBatch, db: dbPG, cfg: activities.Config{PoolMax: poolMax, Batch: true}, table: "activities_batch"},
	{key: svcCasB, db: dbCas, cfg: activities.Config{Batch: true}, table: activities.DefaultKeyspace + "_batch"},
}

// row is one row to measure.
type row struct {
	label string
	svc   string // a serviceSpec key
	conns int
	ref   *lab.Ref
}

func ref(rps, meanMS float64) *lab.Ref { return &lab.Ref{RPS: lab.F(rps), MeanMS: lab.F(meanMS)} }

// claimRows are the claims' rows, measured in rounds; sets returns the
// others, each set's rows writing to tables of their own.
var claimRows = []row{
	{pgSQL12, svcPGSQL, manyConn, ref(323, 42.74)},
	{casP12, svcCasP, manyConn, ref(1213, 18.74)},
	{pg12, svcPG, manyConn, nil},
	{cas12, svcCas, manyConn, nil},
}

func otherRows(o lab.Options) []row {
	rows := []row{
		{pgSQL1, svcPGSQL, 1, ref(521, 2.50)},
		{casP1, svcCasP, 1, ref(355, 2.81)},
		{pgB12, svcPGBatch, manyConn, nil},
		{casB12, svcCasB, manyConn, nil},
	}
	if o.Mode == lab.Full {
		rows = append(rows, row{pg1, svcPG, 1, nil}, row{cas1, svcCas, 1, nil},
			row{pgB1, svcPGBatch, 1, nil}, row{casB1, svcCasB, 1, nil})
	}
	return rows
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	d := 3*time.Second + 20*time.Second + 10*time.Second // Postgres, two Cassandra nodes, the services
	d += 40 * time.Second                                // the nodes' warm-up, typically
	d += min(o.PairBudget(), 5*time.Duration(len(claimRows))*(runDur+500*time.Millisecond))
	d += time.Duration(len(otherRows(o))) * (2*o.Warmup() + time.Duration(o.Repeats())*runDur + time.Second)
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
	// external: the database is a server the lab did not start (no
	// process of ours to sample).
	external bool
}

// databases are the running databases.
type databases struct {
	pg  *deps.Postgres
	cas map[string]*deps.Cassandra // by db name
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	dir := filepath.Join(run.Opts.WorkDir, e.Name())
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("app", fmt.Sprintf("hlab serve activities, %.0f CPU, %d MB each (GOMAXPROCS follows the quota); Postgres through database/sql with no limits set (the report's app) or a pgx pool of at most %d; gocql %d connections, consistency %s; timeout %v",
		appCPU, appMemMB, poolMax, activities.DefaultCassandraConns, activities.DefaultConsistency, activities.DefaultTimeout))
	run.SetEnv("load", fmt.Sprintf("hlab load, closed model (wrk -cN), GET /handle: one random activity inserted per request (report A3); runs of %v after a warm-up; the claims' rows in rounds, their order alternating", runDur))
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
	measurement := func(r row) (lab.Measurement, error) {
		s := services[r.svc]
		procs := []*sandbox.Process{s.svc.Proc}
		if !s.external {
			dbProc := s.db()
			if dbProc == nil {
				return lab.Measurement{}, fmt.Errorf("nosql: %s: its database is not running", r.label)
			}
			procs = append(procs, dbProc)
		}
		m := lab.Measurement{
			Label: r.label, URL: s.svc.URL("/handle"), Ref: r.ref,
			Procs:    procs,
			Load:     []loadgen.Option{loadgen.Connections(r.conns)},
			Duration: runDur,
		}
		if r.svc == svcPGBatch || r.svc == svcCasB {
			metrics := s.svc.URL("/metrics")
			m.Counters = []lab.Counter{
				{Key: "batch_rows", URL: metrics, Name: "activities_batch_rows_sum"},
				{Key: "batches", URL: metrics, Name: "activities_batch_rows_count"},
			}
		}
		return m, nil
	}
	// Each Cassandra node until its throughput stops climbing, both at once.
	var steady []lab.Measurement
	for _, r := range claimRows {
		if strings.HasPrefix(r.svc, "cassandra") {
			m, err := measurement(r)
			if err != nil {
				return err
			}
			m.Label, m.Steady = r.label+" (JIT warm-up)", true
			steady = append(steady, m)
		}
	}
	if err := run.WarmUp(ctx, steady...); err != nil {
		return err
	}

	rows := map[string]*lab.Row{}
	measureSet := func(set []row, paired bool) error {
		ms := make([]lab.Measurement, len(set))
		for i, r := range set {
			var err error
			if ms[i], err = measurement(r); err != nil {
				return err
			}
		}
		// Warm up, then truncate: a row's table then holds exactly what
		// its measured runs wrote.
		if err := run.WarmUp(ctx, ms...); err != nil {
			return err
		}
		for _, r := range set {
			if err := services[r.svc].tab.truncate(ctx); err != nil {
				return fmt.Errorf("nosql: %s: truncate %s: %w", r.label, services[r.svc].tab.name, err)
			}
		}
		var measured []*lab.Row
		if paired {
			var err error
			if measured, err = run.MeasurePaired(ctx, lab.Paired{Measurements: ms}); err != nil {
				return err
			}
		} else {
			for _, m := range ms {
				row, err := run.Measure(ctx, m)
				if err != nil {
					return err
				}
				measured = append(measured, row)
			}
		}
		for i, row := range measured {
			if err := countRow(ctx, run, services[set[i].svc].tab, row); err != nil {
				return err
			}
			rows[row.Label] = row
			run.AddRow(row)
		}
		return nil
	}
	if err := measureSet(claimRows, true); err != nil {
		return err
	}
	for _, r := range otherRows(run.Opts) {
		if err := measureSet([]row{r}, false); err != nil {
			return err
		}
	}

	ratio := func(a, b string) string {
		x, y := rows[a], rows[b]
		if x == nil || y == nil || x.RPS == nil || y.RPS == nil || *y.RPS == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2fx (%.0f vs %.0f req/s)", *x.RPS / *y.RPS, *x.RPS, *y.RPS)
	}
	run.Note("the report's setup, cassandra/postgres: %s at 1 connection (report: %.2fx), %s at 12 connections (report: %.2fx)",
		ratio(casP1, pgSQL1), 355.0/521.0, ratio(casP12, pgSQL12), reportX)
	run.Note("what each side's setting is worth at 12 connections: postgres with a bounded pgx pool against the report's database/sql defaults %s; cassandra's periodic commit log against its durable one %s",
		ratio(pg12, pgSQL12), ratio(casP12, cas12))
	run.Note("what --batch buys at 12 connections: postgres %s, cassandra %s; batched postgres against durable cassandra: %s",
		ratio(pgB12, pg12), ratio(casB12, cas12), ratio(pgB12, cas12))
	return nil
}

// countRow counts the rows in tab and compares them with the writes the
// load generator saw acknowledged in row's runs (Row.Acked, Row.Stored).
func countRow(ctx context.Context, run *lab.Run, tab table, row *lab.Row) error {
	var acked int64
	for code, n := range row.StatusCodes {
		if c, err := strconv.Atoi(code); err == nil && c >= 200 && c < 300 {
			acked += n
		}
	}
	run.Progress.Step(row.Label+": count rows", time.Second)
	stored, err := tab.count(ctx)
	if err != nil {
		return fmt.Errorf("nosql: %s: count the rows in %s: %w", row.Label, tab.name, err)
	}
	row.Acked, row.Stored = &acked, &stored
	note := fmt.Sprintf("acked %d, stored %d", acked, stored)
	if acked == stored {
		note += ": equal"
	} else {
		note += fmt.Sprintf(": MISMATCH (%+d)", stored-acked)
	}
	if n := row.Figures["batches"]; n > 0 {
		row.Figures["mean_batch_rows"] = row.Figures["batch_rows"] / n
		note += fmt.Sprintf("; %.1f rows per batch on average", row.Figures["mean_batch_rows"])
	}
	if row.Note == "" {
		row.Note = note
	} else {
		row.Note = note + "; " + row.Note
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
	pg, err := run.Postgres(ctx, deps.PostgresConfig{Durable: true, CPU: dbCPU})
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() {
		if !pg.External() {
			keepLog(filepath.Join(pg.Dir, "postgres.log"), filepath.Join(dir, "postgres.log"))
		}
		pg.Stop()
	})
	dbs.pg = pg
	run.SetEnv("postgres", fmt.Sprintf("%s, %.0f CPU (quota), no memory limit, durable", pg.Kind, dbCPU))
	pgSettings := settings(pg.Settings, "port", "unix_socket_directories", "listen_addresses") + "; others at their defaults (shared_buffers 128MB)"
	if pg.External() {
		pgSettings = settings(pg.Settings) + " (read from the server; the lab does not set them)"
	}
	run.SetEnv("postgres_settings", pgSettings)

	// Cassandra: the durable node, and in --full the default one, started
	// at once (starting is not measured).
	nodes := []string{dbCasPerio, dbCas}
	run.Progress.Step(fmt.Sprintf("cassandra: start %d node(s) (the JVM takes 10-30 s)", len(nodes)), 20*time.Second)
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
	)
	if run.Opts.ExternalFor(lab.DepCassandra) {
		// One cluster the lab does not configure: both rows' "nodes" are
		// it, each service on a keyspace of its own.
		c, err := run.Cassandra(ctx, deps.CassandraConfig{})
		if err != nil {
			return nil, stop, err
		}
		stops = append(stops, func() { c.Stop() })
		for _, name := range nodes {
			dbs.cas[name] = c
			run.SetEnv(name, c.Kind)
			run.SetEnv(name+"_settings", settings(c.Settings)+" (read from the node's system_views.settings; the lab does not set them)")
		}
		run.Note("Cassandra is an external server: the rows named \"periodic commit log\" and \"durable commit log\" both run on its own commit log setting (%s), which the lab does not change; its CPU is not measured", orUnknown(c.Settings["commitlog_sync"]))
		run.SetEnv("durability", fmt.Sprintf("postgres fsync=%s, synchronous_commit=%s; cassandra (external): commitlog_sync=%s for every row",
			orUnknown(pg.Settings["fsync"]), orUnknown(pg.Settings["synchronous_commit"]), orUnknown(c.Settings["commitlog_sync"])))
		return dbs, stop, nil
	}
	for _, name := range nodes {
		wg.Go(func() {
			c, err := run.Cassandra(ctx, deps.CassandraConfig{Durable: name == dbCas, JVMConfig: deps.JVMConfig{CPU: dbCPU, HeapMB: heapMB}})
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
	run.SetEnv("durability", fmt.Sprintf("postgres fsync=%s, synchronous_commit=%s (durable: its default, and the report's); cassandra: the report's node commitlog_sync=%s (its default: a write is acknowledged before its fsync), the durable node commitlog_sync=%s (a write waits for the sync, concurrent writes sharing one)",
		pg.Settings["fsync"], pg.Settings["synchronous_commit"], dbs.cas[dbCasPerio].Settings["commitlog_sync"], dbs.cas[dbCas].Settings["commitlog_sync"]))
	return dbs, stop, nil
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
		var (
			cfg = sp.cfg
			s   = &service{}
		)
		if sp.db == dbPG {
			pg := dbs.pg
			if err := pg.CreateDatabase(ctx, sp.table); err != nil {
				return nil, closeAll, err
			}
			cfg.Store, cfg.DSN = activities.Postgres, pg.ServiceDSN(sp.table)
			conn, err := pgx.Connect(ctx, pg.DSN(sp.table))
			if err != nil {
				return nil, closeAll, fmt.Errorf("nosql: %w", err)
			}
			closers = append(closers, func() { conn.Close(context.Background()) })
			s.db, s.external = pg.Proc, pg.External()
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
			keyspace := c.Keyspace(keyspaceName(sp))
			cfg.Store, cfg.Cassandra, cfg.Keyspace, cfg.Consistency = activities.Cassandra, c.Addr, keyspace, activities.DefaultConsistency
			qualified := keyspace + "." + activities.Table
			s.db, s.external = c.Proc, c.External()
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
		run.Progress.Step("start hlab serve activities: "+sp.key, 2*time.Second)
		svc, err := run.StartCommand(ctx, "activities", appCPU, appMemMB, cfg.Command())
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, func() { svc.Stop() })
		s.svc = svc
		out[sp.key] = s
	}
	return out, closeAll, nil
}

// keyspaceName is sp's keyspace: its table, after its node's name for
// the periodic node, so that the two nodes' keyspaces differ when both
// are one external cluster.
func keyspaceName(sp serviceSpec) string {
	if sp.db == dbCas {
		return sp.table
	}
	return strings.ReplaceAll(sp.db, "-", "_") + "_" + sp.table
}

func orUnknown(s string) string { return cmp.Or(s, "unknown") }

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
