// Package crudexp is report C's experiment: the task API (hlab serve
// tasks) at 1 CPU and 2 GB like the report's instance, on a real Postgres
// that runs unconstrained and durable, under the report's k6 iteration
// (each virtual user signs in once, then loops create -> update -> get ->
// delete; package tasksload). Every one of report C's seven optimizations
// is a switch of the service (tasks.Deopt); the lab's OTLP sink and
// webhook sink run in its own process, outside the quota.
//
// Rows, in the order they run:
//   - every optimization on at a fixed 3,000 req/s (open model, latency
//     from intended send times; the richer iteration, below), and in
//     --full the report's fixed-count runs: 1,000,000 requests with every
//     optimization on and 12,000 and 100,000 with every one off (closed
//     model, 100 VUs, like the report's k6), each with its requests per
//     minute and CPU average and peak beside the report's (fixed.go);
//   - the claim's rows, all seven on and all seven off, in rounds whose
//     order alternates (lab.MeasurePaired), then each optimization off in
//     turn (1, 2, 3, 4, 5, 7), 100 VUs, closed model (rows.go);
//   - the richer iteration, with 4-5 list reads after the get (65% reads,
//     the report's traffic mix), all on and indexes off: the lists'
//     indexes, which the report's iteration does not reach;
//   - optimization 6 at 1,200 connections, more than a soft limit of
//     1,024 open files allows: raised (all on) and kept at 1,024;
//   - ours, not the report's: two instances with --events postgres, a
//     WebSocket per account on each, changes at a fixed 200/s through one,
//     and each event's delivery time on the other (delivery.go).
//
// Every configuration runs at once, idle while another is measured, so
// the claim's rows can run in rounds (services.go). The all-on rows that
// run alone come first, on the database as seeded.
//
// The report's slow query was its GET's: the task GET here is the query
// GORM's Joins preload with First writes, the task LEFT JOIN its details
// (a has-one table), ORDER BY the primary key, LIMIT 1, and the index
// switch adds the index on the join's column. The index only matters with
// data: the database is seeded with accounts of 100 tasks each, every
// task with its details row (2,000 accounts, 200,000 tasks in quick mode;
// 10,000 and 1,000,000 in full mode), interleaved as a live system writes
// them, and 4 devices each (seed.go). Before any load, EXPLAIN ANALYZE of
// the GET's query on each database gives its time and its join's beside
// the rows, and its plan in a note (explain.go); the list query's own
// time is measured after the rows.
//
// The setup beside the report's, item by item, is setup.go's.
package crudexp

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/tasksload"
)

// The report's setup, and our targets.
const (
	serviceCPU     = 1.0  // report C: 1 vCPU ...
	serviceMemMB   = 2048 // ... and 2 GB
	vus            = 100  // the report's k6 ran 100 VUs
	openVUs        = 200  // open model: VUs (connections) at most, above rate x latency
	devicesPerUser = 4    // VUs per account: one user, several devices
	openRate       = 3000 // req/s the service must sustain with p99 < 50 ms
	millionReqs    = 1_000_000
	hundredKReqs   = 100_000 // the report's run that failed with "too many connections"
	twelveKReqs    = 12_000  // the report's first run: 100 VUs x 30 iterations
	seedTasks      = 100     // per user
	seedDevices    = 4       // per user
	bcryptCost     = 10
	queryProbes    = 7 // runs of the list query, timed directly (median)
	// wideConns is more connections than a soft limit of 1,024 open files
	// lets the service accept, with its database, webhook and WebSocket
	// sockets beside them; wideTimeout bounds a request on a connection
	// the service never accepts (each run is cut at its duration).
	wideConns   = 1200
	wideTimeout = 2 * time.Second
	// slowBound is the success the slow rows are held to: with every
	// optimization off (or the indexes), requests over the service's 5 s
	// request timeout answer 503 by design (the full run answered 85%).
	slowBound = 0.5
)

// Experiment is report C's crud experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

// timing returns each measured run's duration, the open-model row's, and
// how many accounts of seedTasks tasks to seed. Quick mode seeds 200,000
// tasks (about 5 s), full mode 1,000,000 (about 20 s): either way a list
// without the index scans the whole table.
func timing(o lab.Options) (run, open time.Duration, users int) {
	if o.Mode == lab.Full {
		return 10 * time.Second, 30 * time.Second, 10_000
	}
	return 5 * time.Second, 5 * time.Second, 2_000
}

// seedTime is about how long Postgres takes to seed users accounts once,
// their tasks' details rows included.
func seedTime(users int) time.Duration { return time.Duration(users) * 3 * time.Millisecond }

func (*Experiment) Estimate(o lab.Options) time.Duration {
	run, open, users := timing(o)
	row := o.Warmup() + time.Duration(o.Repeats())*run
	// All off answers about 100 req/s, its GET scanning task_details: its
	// runs last 2,000 requests (about 25 s with the warm-up).
	pairs := 4 * (run + 25*time.Second)
	rows := time.Duration(len(variants)) * (3*time.Second + row)
	// Richer iteration: the row without indexes runs about 120 req/s.
	rich := 2*row + 14*time.Second
	wide := 2 * (o.Warmup() + time.Duration(o.Repeats())*(run+wideTimeout))
	starts := time.Duration(len(variants)+3) * time.Second
	delivery := 6*time.Second + deliveryDuration(o) + deliveryGrace
	d := 2*seedTime(users) + pairs + rows + rich + wide + starts + open + delivery + o.Warmup() + 10*time.Second
	if o.Mode == lab.Full {
		d += millionReqs / 4000 * time.Second                 // at about 4,000 req/s
		d += (hundredKReqs + twelveKReqs) / 130 * time.Second // all off, at about 130 req/s
	}
	return d
}

// bench is one run of the experiment: its database, sinks and services,
// and what it measured and sampled, by row.
type bench struct {
	run             *lab.Run
	runDur, openDur time.Duration
	users           int
	pg              *deps.Postgres
	dbs             map[bool]*pgx.Conn // by "with indexes"
	dsns            map[bool]string
	seeded          time.Duration
	hook            *sink
	secret          string
	sc              *tasksload.Scenario // the report's iteration, signed in once for every service
	rich            *tasksload.Scenario // the richer iteration on the all-on service
	svcs            map[labresult.Key]*instance
	rows            map[labresult.Key]*labresult.Row
	sampled         map[labresult.Key]*sampled
	listQuery       map[bool]float64 // the list query's time in ms, by "with indexes"
	getPlan         map[bool]plan    // the GET's query explained, by "with indexes"
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	b := newBench(run)
	defer b.stop()
	if err := b.setUp(ctx); err != nil {
		return err
	}
	for _, phase := range []func(context.Context) error{
		// The all-on rows that run alone come first, on the database as
		// seeded and vacuumed: after the others it would carry their
		// churn (tens of thousands of tasks made and deleted by several
		// configurations) and the autovacuum it calls for, which is not
		// the all-on service's.
		b.openRow,
		b.fixedRuns,
		b.reportRows,
		b.richRows,
		b.wideRows,
		b.probeListQuery,
		b.deliveryRow,
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	b.addRows()
	return nil
}

func newBench(run *lab.Run) *bench {
	b := &bench{run: run, dbs: map[bool]*pgx.Conn{}, dsns: map[bool]string{}, listQuery: map[bool]float64{}, getPlan: map[bool]plan{},
		svcs: map[labresult.Key]*instance{}, rows: map[labresult.Key]*labresult.Row{}, sampled: map[labresult.Key]*sampled{},
		sc: &tasksload.Scenario{Users: vus / devicesPerUser, Email: tasks.SeedEmail, Password: tasks.SeedPassword}}
	b.runDur, b.openDur, b.users = timing(run.Opts)
	return b
}

// setUp starts Postgres and seeds it, explains the GET's query on the
// seeded data, starts the sinks and every configuration of the service,
// and records the environment.
func (b *bench) setUp(ctx context.Context) error {
	if err := b.startPostgres(ctx); err != nil {
		return err
	}
	if err := b.seed(ctx); err != nil {
		return err
	}
	if err := b.explainGet(ctx); err != nil {
		return err
	}
	if err := b.startSinks(); err != nil {
		return err
	}
	b.setEnv()
	return b.startServices(ctx)
}

// stop stops what setUp started, the services first.
func (b *bench) stop() {
	b.stopServices()
	if b.hook != nil {
		b.hook.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, conn := range b.dbs {
		conn.Close(ctx)
	}
	if b.pg != nil {
		b.pg.Stop()
	}
}

// setEnv records the run's environment: the service's quota, Postgres and
// its settings, the seed, the load and the sinks.
func (b *bench) setEnv() {
	run := b.run
	run.SetEnv("service", fmt.Sprintf("hlab serve tasks at %.0f CPU, %d MB (%s)", serviceCPU, serviceMemMB, run.Sandbox.Mechanism()))
	run.SetEnv("postgres", b.pg.Kind+", unconstrained, durable")
	run.SetEnv("postgres_settings", b.pg.SettingsLine())
	run.SetEnv("seed", fmt.Sprintf("%d users x %d tasks = %d tasks (interleaved), %d devices, in two databases (with and without the indexes); seeded in %.0f s",
		b.users, seedTasks, b.users*seedTasks, b.users*seedDevices, b.seeded.Seconds()))
	run.SetEnv("load", fmt.Sprintf("hlab load's tasks scenario: %d VUs on %d accounts (%d devices each), sign in once, "+
		"then the report's iteration, create, update, get, delete (%.0f%% reads); rows marked richer iteration add 4-5 lists after the get (%.0f%% reads); closed model unless the row says open",
		vus, vus/devicesPerUser, devicesPerUser, 100*b.sc.ReadShare(), 100*(&tasksload.Scenario{Lists: true}).ReadShare()))
	run.SetEnv("method", "every configuration runs at once (idle when not measured); the claim's rows (all on, all off) run in rounds, their order alternating, so a burst of load from elsewhere on the machine weighs on both alike; the other rows one after another")
	run.SetEnv("webhook", "in-process sink in the lab (answers 204 at once)")
	run.SetEnv("websockets", fmt.Sprintf("%d per service, one per account, read by the lab", vus/devicesPerUser))
	run.SetEnv("tracing", "OTLP/HTTP to an in-process sink in the lab (outside the quota, answers at once); optimization 2 on: 1% of requests traced, "+
		"spans dropped when the export queue (2,048) is full; off: every request traced, a full queue makes requests wait")
	run.SetEnv("bcrypt_cost", fmt.Sprint(bcryptCost))
}
