// Package crud is report C's experiment: the task API (hlab serve tasks)
// at 1 CPU and 2 GB like the report's instance, on a real Postgres that
// runs unconstrained and durable, under the report's k6 scenario (each
// virtual user signs in once, then create -> update -> get -> delete,
// with list reads for a 65/35 read/write mix). Rows: every optimization
// on at a fixed 3,000 req/s (open model, latency from intended send
// times) and, in --full, for 1,000,000 requests (closed model, 100 VUs,
// like the report's k6 run), both first, on the database as seeded; then
// every optimization on, each of report C's optimizations off in turn,
// and all off, in the closed model. Every configuration runs at once,
// idle while another is measured; the claim's rows (all on, all off) run
// in rounds, their order alternating (lab.MeasurePaired), the others one
// after another.
//
// The index switch only matters with data: the database is seeded with
// accounts of 100 tasks each (2,000 accounts, 200,000 tasks in quick mode;
// 10,000 and 1,000,000 in full mode), interleaved as a live system writes
// them, and 4 devices each; the list query's own time is measured beside
// the request figures.
package crudexp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/loadgen"
)

// The report's setup, and the targets.
const (
	serviceCPU     = 1.0  // report C: 1 vCPU ...
	serviceMemMB   = 2048 // ... and 2 GB
	vus            = 100  // the report's k6 ran 100 VUs
	openVUs        = 200  // open model: VUs (connections) at most, above rate x latency
	devicesPerUser = 4    // VUs per account: one user, several devices
	openRate       = 3000 // req/s the service must sustain with p99 < 50 ms
	millionReqs    = 1_000_000
	seedTasks      = 100 // per user
	seedDevices    = 4   // per user
	bcryptCost     = 10
	queryProbes    = 7 // runs of the list query, timed directly (median)
)

// Row labels; the claim and the notes refer to them.
const (
	allOn      = "all optimizations on"
	open3000   = "all on, open model 3,000 req/s"
	million    = "all on, 1,000,000 requests (closed model, 100 VUs)"
	poolOff    = "1. pool limits off (database/sql defaults)"
	indexOff   = "3. indexes off"
	touchOn    = "4. user row updated on every request (the lock bug)"
	defaultTx  = "5. a transaction around every write (ORM default)"
	perJob     = "7. a goroutine per side job (no worker queue)"
	allOff     = "all optimizations off"
	queryMSKey = "list_query_ms"
)

// variant is a service configuration measured as a closed-model row.
type variant struct {
	label string
	deopt tasks.Deopt // the optimizations it turns off
	ref   *lab.Ref
	// report is what the report says the optimization was worth.
	report string
}

var (
	on = variant{label: allOn, ref: &lab.Ref{RPS: lab.F(11500.0 / 60), MeanMS: lab.F(2000)}}
	// slowBound is the success the slow rows are held to: with every
	// optimization off (or the indexes), requests over the service's 5 s
	// request timeout answer 503 by design (the full run answered 85%).
	slowBound = 0.5
	variants  = []variant{
		{label: poolOff, deopt: tasks.Deopt{NoPoolLimits: true}, report: `"too many connections" at 100k requests (Postgres max 410); no ratio given`},
		{label: defaultTx, deopt: tasks.Deopt{DefaultTx: true}, report: "skipping it: +30% throughput (1.3x)"},
		{label: touchOn, deopt: tasks.Deopt{UserTouch: true}, report: "fixing it: 2x throughput"},
		{label: perJob, deopt: tasks.Deopt{GoroutinePerJob: true}, report: "no figure given (here the workers also look devices up for a batch of jobs in one query; a goroutine per job makes one query each)"},
		{label: indexOff, deopt: tasks.Deopt{NoIndexes: true}, report: "a query from 14.6 s to 50 ms (292x)"},
	}
	off = variant{label: allOff, ref: &lab.Ref{RPS: lab.F(52), MeanMS: lab.F(278)},
		deopt: tasks.Deopt{NoPoolLimits: true, NoIndexes: true, DefaultTx: true, UserTouch: true, GoroutinePerJob: true}}
)

// Experiment is report C's crud experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

func (*Experiment) Name() string { return "crud" }

func (*Experiment) Title() string {
	return "a task API on 1 CPU / 2 GB: report C's seven optimizations, each switched off in turn (report C)"
}

func (*Experiment) Claims() []lab.Claim {
	return []lab.Claim{{
		Text:      "with all optimizations on, the task API serves >= 5x the requests per second of all off",
		Metric:    "rps",
		Numerator: allOn, Denominator: allOff,
		AtLeast: 5,
		Report:  "5x (52 req/s before; 10-13k requests per minute after)",
	}}
}

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

// seedTime is about how long Postgres takes to seed users accounts once.
func seedTime(users int) time.Duration { return time.Duration(users) * 2 * time.Millisecond }

func (*Experiment) Estimate(o lab.Options) time.Duration {
	run, open, users := timing(o)
	// All off answers about 100 req/s: its runs last 2,000 requests.
	pairs := 4 * (run + 24*time.Second)
	rows := time.Duration(len(variants)) * (3*time.Second + o.Warmup() + time.Duration(o.Repeats())*run)
	d := 2*seedTime(users) + pairs + rows + open + o.Warmup() + 10*time.Second
	if o.Mode == lab.Full {
		d += millionReqs / 4000 * time.Second // at about 4,000 req/s
	}
	return d
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	runDur, openDur, seedUsers := timing(run.Opts)
	dir := filepath.Join(run.Opts.WorkDir, e.Name())

	run.Progress.Step("postgres: start", 3*time.Second)
	pg, err := deps.StartPostgres(ctx, run.Sandbox, deps.PostgresConfig{Durable: true})
	if err != nil {
		return err
	}
	defer pg.Stop()
	// Two copies of the data: the services with indexes share one, those
	// without the other, so that every configuration runs at once and the
	// claim's rows can run in rounds.
	run.Progress.Step(fmt.Sprintf("postgres: seed 2 x %d users, %d tasks", seedUsers, seedUsers*seedTasks), 2*seedTime(seedUsers))
	seedStart := time.Now()
	dbs := map[bool]*pgx.Conn{} // by "with indexes"
	dsns := map[bool]string{}
	for _, withIdx := range []bool{true, false} {
		name := map[bool]string{true: "tasks", false: "tasks_noidx"}[withIdx]
		if err := pg.CreateDatabase(ctx, name); err != nil {
			return err
		}
		dsns[withIdx] = pg.DSN(name)
		conn, err := pgx.Connect(ctx, dsns[withIdx])
		if err != nil {
			return fmt.Errorf("crud: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		dbs[withIdx] = conn
		if err := seed(ctx, conn, seedUsers, withIdx); err != nil {
			return err
		}
	}
	seeded := time.Since(seedStart)

	hook, err := startSink()
	if err != nil {
		return err
	}
	defer hook.close()
	secret := filepath.Join(dir, "token-secret")
	if err := writeSecret(secret); err != nil {
		return err
	}

	run.SetEnv("service", fmt.Sprintf("hlab serve tasks at %.0f CPU, %d MB (%s)", serviceCPU, serviceMemMB, run.Sandbox.Mechanism()))
	run.SetEnv("postgres", pg.Kind+", unconstrained, durable")
	run.SetEnv("postgres_settings", settings(pg.Settings))
	run.SetEnv("seed", fmt.Sprintf("%d users x %d tasks = %d tasks (interleaved), %d devices, in two databases (with and without the indexes); seeded in %.0f s",
		seedUsers, seedTasks, seedUsers*seedTasks, seedUsers*seedDevices, seeded.Seconds()))
	run.SetEnv("load", fmt.Sprintf("hlab load's tasks scenario: %d VUs on %d accounts (%d devices each), sign in once, "+
		"then create, update, get, 4-5 lists, delete: %.0f%% reads; closed model unless the row says open",
		vus, vus/devicesPerUser, devicesPerUser, 100*ReadShare()))
	run.SetEnv("method", "every configuration runs at once (idle when not measured); the claim's rows (all on, all off) run in rounds, their order alternating, so a burst of load from elsewhere on the machine weighs on both alike; the other rows one after another")
	run.SetEnv("webhook", "in-process sink in the lab (answers 204 at once)")
	run.SetEnv("websockets", fmt.Sprintf("%d per service, one per account, read by the lab", vus/devicesPerUser))
	run.SetEnv("tracing", "1% sampled, no exporter (trace ids in logs)")
	run.SetEnv("bcrypt_cost", fmt.Sprint(bcryptCost))

	sc := &Scenario{Users: vus / devicesPerUser, Email: tasks.SeedEmail, Password: tasks.SeedPassword}

	// Every configuration, started once.
	all := append([]variant{on}, variants...)
	all = append(all, off)
	svcs := make([]*lab.Service, len(all))
	defer func() {
		for _, s := range svcs {
			if s != nil {
				s.Stop()
			}
		}
	}()
	for i, v := range all {
		run.Progress.Step(v.label+": start the service", 3*time.Second)
		o := tasks.Options{
			Config:     tasks.Config{DatabaseURL: dsns[!v.deopt.NoIndexes], WebhookURL: hook.url, BcryptCost: bcryptCost, Deopt: v.deopt},
			SecretFile: secret, LogFormat: "json",
		}
		if svcs[i], err = run.StartService(ctx, "tasks", serviceCPU, serviceMemMB, o.Args()...); err != nil {
			return err
		}
	}
	// Accounts have the same ids in both databases, and every service the
	// same secret: one sign-in serves them all.
	run.Progress.Step("sign in the accounts (bcrypt)", 3*time.Second)
	if err := sc.SignIn(ctx, "http://"+svcs[0].Addr, vus); err != nil {
		return err
	}
	watchers := make([]*watcher, len(all))
	defer func() {
		for _, w := range watchers {
			if w != nil {
				w.stop()
			}
		}
	}()
	for i, s := range svcs {
		if watchers[i], err = watch(ctx, s.Addr, sc, vus/devicesPerUser); err != nil {
			return err
		}
	}

	// One scenario per service: a VU's task lives in that service's database.
	scs := make([]*Scenario, len(all))
	for i := range all {
		scs[i] = sc.Clone()
	}
	measurement := func(v variant, svc *lab.Service, sc *Scenario, d time.Duration, load ...loadgen.Option) lab.Measurement {
		metrics := svc.URL("/metrics")
		return lab.Measurement{
			Label: v.label, URL: svc.URL("/"), Ref: v.ref, Duration: d,
			Procs:   []*sandbox.Process{svc.Proc},
			Metrics: []string{metrics},
			Counters: []lab.Counter{
				{Key: "db_dials", URL: metrics, Name: "tasks_db_pool_dials_total"},
				{Key: "webhook_calls", URL: metrics, Name: "tasks_notify_attempts_total"},
			},
			Load: append(load, loadgen.WithScenario(sc), loadgen.Timeout(30*time.Second)),
		}
	}
	// Postgres runs outside the quota; its CPU says where the rest went.
	// Per configuration: its CPU summed over runs, the runs, the WebSocket
	// events its devices received.
	pgCPU := make([]float64, len(all))
	pgRuns := make([]int, len(all))
	wsEvents := make([]int64, len(all))
	around := func(i int, measure func() error) error {
		events := watchers[i].events.Load()
		var m *sandbox.Meter
		if p := pg.Proc(); p != nil {
			m = p.Measure()
		}
		err := measure()
		if m != nil {
			pgCPU[i] += m.Stop().CPUAvg
			pgRuns[i]++
		}
		wsEvents[i] += watchers[i].events.Load() - events
		return err
	}
	// The all-on rows that run alone come first, on the database as seeded
	// and vacuumed: after the others it would carry their churn (tens of
	// thousands of tasks made and deleted by seven configurations) and the
	// autovacuum it calls for, which is not the all-on service's.
	single := func(m lab.Measurement) (*lab.Row, error) {
		events := watchers[0].events.Load()
		row, err := run.Measure(ctx, m)
		if err != nil {
			return nil, err
		}
		if row.Figures == nil {
			row.Figures = map[string]float64{}
		}
		row.Figures["ws_events"] = float64(watchers[0].events.Load() - events)
		return row, nil
	}
	m := measurement(variant{label: open3000}, svcs[0], scs[0], openDur, loadgen.Rate(openRate), loadgen.Connections(openVUs))
	m.Repeat = 1
	openRow, err := single(m)
	if err != nil {
		return err
	}
	openRow.Note = mustShowOpen(openRow, openDur)
	var mil *lab.Row
	if run.Opts.Mode == lab.Full {
		// Like the report's k6 run: the VUs go as fast as the service
		// answers, until a million requests are done.
		m := measurement(variant{label: million}, svcs[0], scs[0], 20*time.Minute,
			loadgen.Connections(vus), loadgen.Requests(millionReqs))
		m.Repeat, m.NoWarmup = 1, true
		if mil, err = single(m); err != nil {
			return err
		}
		if mil.RPS != nil && *mil.RPS > 0 {
			mil.Figures["seconds"] = float64(mil.Requests) / *mil.RPS
		}
		mil.Note = mustShowMillion(mil)
	} else {
		run.NotRerun("report C's final run: 1M requests in about 2 hours, CPU peak 60%, 150 MB, mean about 2 s", "rerun in --full (1,000,000 requests, closed model, 100 VUs)")
	}
	run.NotRerun("optimization 2, capping the telemetry collector's resources", "no collector runs beside the service here (traces are sampled at 1%, with no exporter), so there is nothing to switch off")
	run.NotRerun("optimization 6, raising the open-file limit from 1024", "the service raises its limit at start and logs it; it is not switchable, and 100 VUs stay far under 1024 sockets")
	run.NotRerun(`"too many connections" at 100k requests (Postgres max 410)`, "not a figure to rerun: the pool-limits-off row shows what unbounded connections cost here instead")

	ms := make([]lab.Measurement, len(all))
	for i, v := range all {
		ms[i] = measurement(v, svcs[i], scs[i], runDur, loadgen.Connections(vus))
		if v.label == off.label || v.label == indexOff {
			ms[i].MinSuccess = slowBound
		}
	}
	last := len(all) - 1
	claimRows, err := run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{ms[0], ms[last]},
		Around: func(i int, measure func() error) error { return around(map[int]int{0: 0, 1: last}[i], measure) }})
	if err != nil {
		return err
	}
	rows := make([]*lab.Row, len(all))
	rows[0], rows[last] = claimRows[0], claimRows[1]
	for i := 1; i < last; i++ {
		var row *lab.Row
		err := around(i, func() error {
			var err error
			row, err = run.Measure(ctx, ms[i])
			return err
		})
		if err != nil {
			return err
		}
		rows[i] = row
	}
	for i, row := range rows {
		if row.Figures == nil {
			row.Figures = map[string]float64{}
		}
		if pgRuns[i] > 0 {
			row.Figures["postgres_cpu"] = pgCPU[i] / float64(pgRuns[i])
		}
		row.Figures["ws_events"] = float64(wsEvents[i])
	}
	// The list query's own time, straight on each database, for a seeded
	// account no VU uses.
	probeUser := int64(seedUsers / 2)
	for withIdx, conn := range dbs {
		q, err := listQueryMS(ctx, conn, probeUser)
		if err != nil {
			return err
		}
		for i, v := range all {
			if !v.deopt.NoIndexes == withIdx {
				rows[i].Figures[queryMSKey] = q
			}
		}
	}

	out := []*lab.Row{rows[0], openRow}
	if mil != nil {
		out = append(out, mil)
	}
	out = append(out, rows[1:]...)
	notes(out)
	for _, r := range out {
		run.AddRow(r)
	}
	return nil
}

// seed migrates and fills one database: without the indexes, which are
// then built once (faster than updating them row by row), or left out.
func seed(ctx context.Context, conn *pgx.Conn, users int, withIndexes bool) error {
	if _, err := tasks.MigrateExcept(ctx, conn, "indexes"); err != nil {
		return err
	}
	if err := tasks.Seed(ctx, conn, tasks.SeedSpec{Users: users, TasksPerUser: seedTasks, DevicesPerUser: seedDevices, BcryptCost: bcryptCost}); err != nil {
		return err
	}
	if withIndexes {
		if _, err := tasks.Migrate(ctx, conn); err != nil {
			return err
		}
	}
	return nil
}

// notes puts, beside each switched-off row, how much all-on beats it and
// what the report said the optimization was worth.
func notes(rows []*lab.Row) {
	find := func(label string) *lab.Row {
		for _, r := range rows {
			if r.Label == label {
				return r
			}
		}
		return nil
	}
	best := find(allOn)
	if best == nil || best.RPS == nil {
		return
	}
	for _, v := range append(slices.Clone(variants), off) {
		r := find(v.label)
		if r == nil || r.RPS == nil || *r.RPS == 0 {
			continue
		}
		ratio := *best.RPS / *r.RPS
		r.Note = fmt.Sprintf("all on / this row: %.2fx RPS", ratio)
		if v.report != "" {
			r.Note += "; report: " + v.report
		}
		if v.label == off.label {
			r.Note += "; report: 5x overall"
		}
		if v.label == off.label || v.label == indexOff {
			r.Note += fmt.Sprintf("; held to %.0f%% success: requests over the service's 5 s timeout answer 503 by design (the full run answered 85%%)", slowBound*100)
		}
		if q, ok := r.Figures[queryMSKey]; ok && v.deopt.NoIndexes {
			if qb, ok := best.Figures[queryMSKey]; ok && qb > 0 {
				r.Note += fmt.Sprintf("; list query %.2f ms -> %.2f ms with the indexes (%.0fx)", q, qb, q/qb)
			}
		}
	}
}

// failures counts a row's requests without a 2xx/3xx answer.
func failures(r *lab.Row) int64 {
	var n int64
	for _, v := range r.Errors {
		n += v
	}
	for code, v := range r.StatusCodes {
		if len(code) == 3 && code[0] >= '4' {
			n += v
		}
	}
	return n
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func val(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// mustShowOpen judges the open-model row against issue 8's target: every
// intended request sent and answered (rate x duration; the row's RPS
// counts the drain of the last answers too, so it reads a little under
// the rate), p99 from the intended send times under 50 ms, no errors.
func mustShowOpen(r *lab.Row, d time.Duration) string {
	want := int64(openRate * d.Seconds() * float64(r.Runs))
	p99, fails := val(r.P99MS), failures(r)
	ok := r.Requests >= want && p99 < 50 && fails == 0
	return fmt.Sprintf("target >= %d req/s sustained, p99 < 50 ms, 0 errors: %s (%d of %d requests in %s at %.0f req/s, p99 %.1f ms, %d errors, %d sends > 10 ms late)",
		openRate, met(ok), r.Requests, want, d, val(r.RPS), p99, fails, r.Late)
}

// mustShowMillion judges the 1M-request row against issue 8's target.
func mustShowMillion(r *lab.Row) string {
	secs := r.Figures["seconds"]
	rss, fails := val(r.RSSMBMax), failures(r)
	ok := r.Requests >= millionReqs && secs < 360 && rss <= 150 && fails == 0
	return fmt.Sprintf("target 1,000,000 requests in < 6 min with RSS <= 150 MB: %s (%d requests in %.0f s, RSS max %.0f MB, CPU avg %.2f, p50 %.1f ms, p99 %.1f ms, %d errors); report C: ~2 hours, 150 MB, mean ~2 s",
		met(ok), r.Requests, secs, rss, val(r.CPUAvg), val(r.P50MS), val(r.P99MS), fails)
}

// listQueryMS times the list endpoint's query for one user straight on
// the database, without the service: the median of queryProbes runs.
func listQueryMS(ctx context.Context, conn *pgx.Conn, uid int64) (float64, error) {
	const q = `SELECT id, title, description, status, priority, due_at, created_at, updated_at
		FROM tasks WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0`
	var times []float64
	for range queryProbes {
		start := time.Now()
		rows, err := conn.Query(ctx, q, uid)
		if err != nil {
			return 0, fmt.Errorf("crud: list query: %w", err)
		}
		for rows.Next() {
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("crud: list query: %w", err)
		}
		times = append(times, float64(time.Since(start).Microseconds())/1000)
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
}

func settings(s map[string]string) string {
	var parts []string
	for k, v := range s {
		switch k {
		case "port", "unix_socket_directories", "listen_addresses":
			continue
		}
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ") + "; others at their defaults (shared_buffers 128MB)"
}

func writeSecret(path string) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(hex.EncodeToString(b)), 0o600)
}

// sink is the webhook the service posts notifications to: in the lab's
// process, outside the quota, answering at once.
type sink struct {
	url   string
	srv   *http.Server
	calls atomic.Int64
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("crud: webhook sink: %w", err)
	}
	s := &sink{url: "http://" + ln.Addr().String() + "/push"}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *sink) close() { s.srv.Close() }
