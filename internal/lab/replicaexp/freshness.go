package replicaexp

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/replica"
)

const (
	writers      = 16 // connections of the write load: enough that one slow commit does not delay the next
	writeTimeout = 2 * time.Second
	lateAfter    = 10 * time.Millisecond
	lagMetric    = "replica_lag_seconds"
)

// lagRecorder keeps the commit-to-visible delay of every change whose
// commit falls in [from, to), per change, in microseconds. The table's
// applier calls observe right after the change became visible to readers.
type lagRecorder struct {
	from, to time.Time
	mu       sync.Mutex
	h        *hdrhistogram.Histogram
	last     time.Time // latest commit seen
}

func newLagRecorder(from, to time.Time) *lagRecorder {
	return &lagRecorder{from: from, to: to, h: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)}
}

func (r *lagRecorder) observe(commit, visible time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if commit.After(r.last) {
		r.last = commit
	}
	if commit.Before(r.from) || !commit.Before(r.to) {
		return
	}
	r.h.RecordValue(max(1, visible.Sub(commit).Microseconds()))
}

// snapshot is a copy of the window's histogram: the replica may still
// apply a change of the window while the row is made from it.
func (r *lagRecorder) snapshot() *hdrhistogram.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	return hdrhistogram.Import(r.h.Export())
}

func (r *lagRecorder) lastCommit() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// writeStats is what the write load did.
type writeStats struct {
	done, failed, late atomic.Int64
}

// writeLoad calls write(ctx, i) for i = 0, 1, ... at rate per second from
// start until end, on a schedule (open model), from writers goroutines,
// each call bounded by writeTimeout: a write that cannot start within
// 10 ms of its slot is counted late. write updates one customer (by i),
// in Postgres or in MongoDB.
func writeLoad(ctx context.Context, rate int, start, end time.Time, write func(ctx context.Context, i int) error) *writeStats {
	st := &writeStats{}
	jobs := make(chan int, rate)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range jobs {
				wctx, cancel := context.WithTimeout(ctx, writeTimeout)
				err := write(wctx, i)
				cancel()
				if err != nil {
					st.failed.Add(1)
				} else {
					st.done.Add(1)
				}
			}
		})
	}
	interval := time.Second / time.Duration(rate)
	for i := 0; ctx.Err() == nil; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !at.Before(end) {
			break
		}
		time.Sleep(time.Until(at))
		jobs <- i
		if time.Since(at) > lateAfter {
			st.late.Add(1)
		}
	}
	close(jobs)
	wg.Wait()
	return st
}

// pgUpdate is writeLoad's write in Postgres: one transaction updating
// customer i%rows+1.
func pgUpdate(pool *pgxpool.Pool, rows int) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		_, err := pool.Exec(ctx, `UPDATE customers SET credit_limit_cents = credit_limit_cents + 1, updated_at = now() WHERE id = $1`, i%rows+1)
		return err
	}
}

// labReplica is a replica of the customers table in the lab process,
// logging to the experiment's directory.
type labReplica struct {
	rep     *refdata.Replica
	cust    *refdata.Customers
	logPath string
	close   func()
}

// startLabReplica starts a replica in the lab process, on a slot of its
// own, and waits until it has loaded.
func (b *bench) startLabReplica(ctx context.Context) (*labReplica, error) {
	b.run.Progress.Step("freshness: start a replica in the lab", time.Second)
	lr := &labReplica{cust: refdata.NewCustomers(), logPath: filepath.Join(b.run.Opts.WorkDir, name, "lab-replica.log")}
	db := refdata.DB{DSN: b.dsn, Slot: b.pg.Unique("lab_freshness")}
	db.SetDefaults("catalog")
	logf, err := os.Create(lr.logPath)
	if err != nil {
		return nil, fmt.Errorf("freshness: replica log: %w", err)
	}
	rep, err := refdata.NewReplica(db, lr.cust, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(logf, nil)), 0)
	if err != nil {
		logf.Close()
		return nil, err
	}
	lr.rep = rep
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rep.Run(rctx); close(done) }()
	lr.close = func() { stop(); <-done; logf.Close() }
	if err := waitFor(ctx, 30*time.Second, func() bool { return rep.Loaded() && rep.Ready() == nil }); err != nil {
		lr.close()
		return nil, fmt.Errorf("freshness: the lab's replica did not load: %w (%v)", err, rep.Ready())
	}
	return lr, nil
}

// freshness runs the write load against the customers table while two
// replicas follow it: one in this process (every change's delay, exact)
// and the catalog service's own (its replica_lag_seconds histogram). It
// then checks that a row that does not decode is reported and skipped.
func (b *bench) freshness(ctx context.Context, svc *lab.Service) error {
	lr, err := b.startLabReplica(ctx)
	if err != nil {
		return err
	}
	defer lr.close()
	pcfg, err := pgxpool.ParseConfig(b.dsn)
	if err != nil {
		return err
	}
	pcfg.MaxConns = writers
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	b.freshnessRows(ctx, svc, lr, pool)
	bad, err := b.badInput(ctx, pool, svc, lr)
	if err != nil {
		return err
	}
	b.run.AddRow(bad)
	return nil
}

// freshnessRows runs the write load and adds the two replicas' rows.
func (b *bench) freshnessRows(ctx context.Context, svc *lab.Service, lr *labReplica, pool *pgxpool.Pool) {
	t := b.t
	start := time.Now().Add(100 * time.Millisecond)
	from, to := start.Add(t.freshWarm), start.Add(t.freshWarm+t.fresh)
	rec := newLagRecorder(from, to)
	lr.cust.Table.OnChange(func(c replica.Change[int32, refdata.Customer]) {
		if c.Op == replica.Upsert {
			rec.observe(c.Commit, time.Now())
		}
	})

	b.run.Progress.Step(fmt.Sprintf("freshness: %d writes/s", writeRate), t.freshWarm+t.fresh)
	var ws *writeStats
	wdone := make(chan struct{})
	go func() {
		ws = writeLoad(ctx, writeRate, start, to, pgUpdate(pool, refdata.DefaultCustomers))
		close(wdone)
	}()
	time.Sleep(time.Until(from))
	before, berr := scrapeHistogram(ctx, svc.URL("/metrics"), lagMetric)
	pgMeter, svcMeter, clock := b.pg.Proc().Measure(), svc.Proc.Measure(), readCPUClock()
	<-wdone
	pgUse, svcUse := pgMeter.Stop(), svcMeter.Stop()
	machine, _ := readCPUClock().since(clock, runtime.NumCPU())
	// Let both replicas apply the last commits of the window.
	waitFor(ctx, 5*time.Second, func() bool { return !rec.lastCommit().Before(to.Add(-50 * time.Millisecond)) })
	time.Sleep(200 * time.Millisecond)
	after, aerr := scrapeHistogram(ctx, svc.URL("/metrics"), lagMetric)

	writes := ws.done.Load()
	rate := float64(writes) / (t.freshWarm + t.fresh).Seconds()
	load := fmt.Sprintf("%d update transactions in %v (%.0f/s), %d late by > %v, %d failed; in the window, cores used: Postgres %.2f of %.0f (%d CFS-throttled periods), catalog service %.2f, whole machine %.2f of %d",
		writes, t.freshWarm+t.fresh, rate, ws.late.Load(), lateAfter, ws.failed.Load(),
		pgUse.CPUAvg, postgresCPU, pgUse.Throttled, svcUse.CPUAvg, machine, runtime.NumCPU())

	h := rec.snapshot()
	labRow := hdrRow(freshLabKey, h)
	labRow.Set(writesPerS, rate)
	labRow.AddNote("commit (Postgres's commit timestamp) to visible to readers, every change committed in the last %v: %d changes; %s", t.fresh, h.TotalCount(), load)
	b.run.AddRow(labRow)

	svcRow := lab.NewRow(freshSvcKey)
	svcRow.Model, svcRow.Rate, svcRow.Runs = "open", writeRate, 1
	if berr == nil && aerr == nil {
		d := after.sub(before)
		svcRow.Requests = int64(d.Count)
		svcRow.P50MS, svcRow.P90MS, svcRow.P99MS = d.quantileMS(0.50), d.quantileMS(0.90), d.quantileMS(0.99)
		if d.Count > 0 {
			svcRow.MeanMS = labresult.F(d.Sum / d.Count * 1000)
		}
		svcRow.AddNote("the service's replica_lag_seconds over the same window: %.0f changes; percentiles interpolated inside buckets each %.0f%% wider than the last", d.Count, (d.bucketFactor()-1)*100)
	} else {
		svcRow.AddNote("not measured: %v", firstErr(berr, aerr))
	}
	b.run.AddRow(svcRow)
}

// badInput writes a customer without a region (the decoders reject it)
// beside a good one, in one transaction, and returns the row of what the
// two replicas did with them: both must report the bad row and apply the
// good one, and the service must stay ready (the bad-input targets).
func (b *bench) badInput(ctx context.Context, pool *pgxpool.Pool, svc *lab.Service, lr *labReplica) (*labresult.Row, error) {
	decodeErrs := func() float64 {
		m, err := lab.Scrape(ctx, svc.URL("/metrics"))
		if err != nil {
			return math.NaN()
		}
		return m["replica_decode_errors_total"]
	}
	svcBefore, labBefore := decodeErrs(), lr.rep.DecodeErrors()
	const bad, good = 990001, 990002
	if _, err := pool.Exec(ctx, `INSERT INTO customers VALUES
		($1, 'No Region LLC', '', 'x@example', '+7', 0, now()), ($2, 'Good LLC', 'Omsk', 'y@example', '+7', 0, now())`, bad, good); err != nil {
		return nil, fmt.Errorf("bad-row check: %w", err)
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DELETE FROM customers WHERE id IN ($1, $2)`, bad, good)
	serves := func(id int) int {
		resp, err := catalogClient.Get(svc.URL(fmt.Sprintf("/customers/%d", id)))
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(ctx, 10*time.Second, func() bool {
		_, inLab := lr.cust.Table.Get(good)
		return inLab && serves(good) == 200
	})
	hz := 0
	if resp, err := catalogClient.Get(svc.URL("/healthz")); err == nil {
		resp.Body.Close()
		hz = resp.StatusCode
	}
	svcErrs, labErrs := decodeErrs()-svcBefore, lr.rep.DecodeErrors()-labBefore
	// The service's log is where lab.StartService put it.
	svcLogged := logged(filepath.Join(b.run.Opts.WorkDir, name, svc.Name+".log"), bad)
	labLogged := logged(lr.logPath, bad)
	goodStatus, badStatus := serves(good), serves(bad)
	row := lab.NewRow(badInputKey)
	row.Model, row.Runs = "fault", 1
	if !math.IsNaN(svcErrs) { // else the service's metrics did not answer
		row.Set(decodeErrorsService, svcErrs)
	}
	row.Set(decodeErrorsLab, float64(labErrs))
	row.Set(badRowCounted, float64(boolInt(svcErrs == 1)+boolInt(labErrs == 1)))
	row.Set(badRowLogged, float64(boolInt(svcLogged)+boolInt(labLogged)))
	row.Set(goodRowServed, float64(boolInt(goodStatus == 200)))
	row.Set(badRowServed, float64(boolInt(badStatus != 404)))
	row.Set(readyAfter, float64(boolInt(hz == 200)))
	row.AddNote("replica_decode_errors_total +%.0f in the service, +%d in the lab's replica; logged with its key %d: %v and %v; good row served: %v; bad row served: %v (status %d); /healthz %d",
		svcErrs, labErrs, bad, svcLogged, labLogged, goodStatus == 200, badStatus == 200, badStatus, hz)
	return row, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// logged reports whether the log at path has a decode error naming key.
func logged(path string, key int) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "does not decode") && strings.Contains(line, fmt.Sprintf("key %d", key)) {
			return true
		}
	}
	return false
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// hdrRow is a latency-only row of h (microseconds).
func hdrRow(key labresult.Key, h *hdrhistogram.Histogram) *labresult.Row {
	row := lab.NewRow(key)
	row.Model, row.Rate, row.Runs, row.Requests = "open", writeRate, 1, h.TotalCount()
	if h.TotalCount() == 0 {
		return row
	}
	at := func(q float64) *float64 { return labresult.F(float64(h.ValueAtQuantile(q)) / 1000) }
	row.MeanMS = labresult.F(h.Mean() / 1000)
	row.P50MS, row.P90MS, row.P95MS, row.P99MS, row.P999MS = at(50), at(90), at(95), at(99), at(99.9)
	row.MaxMS = labresult.F(float64(h.Max()) / 1000)
	for _, q := range []float64{50, 90, 99, 99.9, 100} {
		row.Percentiles = append(row.Percentiles, labresult.Percentile{Q: q, MS: float64(h.ValueAtQuantile(q)) / 1000})
	}
	return row
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
