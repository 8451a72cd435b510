package timeoutsexp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/internal/services/frontend"
	"github.com/highload-lab/hlab/loadgen"
)

// What report E's closing sections warn of, as fault rows: the domino
// effect (a node that got slow behind a balancer whose health check still
// gets 200 OK from it, so the balancer keeps sending it traffic), a
// connect that never completes (a black hole) and an answer whose body
// trickles in. Each runs with no timeout on the front and with its
// timeouts (and, for the domino, its breaker), at a modest open rate for
// a short while, each on a front of its own, and gives its success ratio
// and p99. The rows with the front's timeouts gate every claim: a front
// whose timeouts let a fault hold it or kill it has not earned them.

const (
	faultRate   = 200 // req/s: enough to fill the front with calls, cheap on two cores
	dominoNodes = 3   // backs behind the balancer, the last one slow
	// The report: "seconds between packets". Four bytes a second apart
	// take 4 s, past the front's 3 s body timeout.
	trickleEvery = time.Second
	trickleBytes = 4
	// dominoBound is what the domino rows with a timeout are held to: one
	// call in three goes to the slow node and is cut at 3 s by design.
	dominoBound  = 0.6
	healthEvery  = 200 * time.Millisecond
	healthWait   = time.Second
	faultControl = 5 * time.Second // bound on a call to a back's /fault
)

// faultTiming is the fault rows' load, the slow node's answers and the
// clients' patience; shorter in Short mode (the wiring, not the figures).
type faultTiming struct {
	requests   int64         // sent at faultRate
	slowNode   time.Duration // how long the slow node's answers take
	clientWait time.Duration // how long a client waits: past the slow node, so its answers count
}

func faultTimingOf(o lab.Options) faultTiming {
	t := faultTiming{requests: 3 * faultRate / 2, slowNode: slowDelay, clientWait: slowDelay + 2*time.Second}
	switch {
	case o.Short:
		t = faultTiming{requests: faultRate / 5, slowNode: 4 * time.Second, clientWait: 5 * time.Second}
	case o.Mode == lab.Full:
		t.requests = 10 * faultRate
	}
	return t
}

func (t faultTiming) load() time.Duration {
	return time.Duration(t.requests) * time.Second / faultRate
}

type faultKind string

const (
	domino    faultKind = "domino"
	blackHole faultKind = "blackhole"
	trickle   faultKind = "trickle"
)

// fault is a fault row: a fault, and the front's policy against it.
type fault struct {
	kind   faultKind
	policy frontend.Policy
}

var faults = []fault{
	{domino, frontend.None}, {domino, frontend.Timeout}, {domino, frontend.Breaker},
	{blackHole, frontend.None}, {blackHole, frontend.Timeout},
	{trickle, frontend.None}, {trickle, frontend.Timeout},
}

func (f fault) key() labresult.Key {
	return labresult.Key(fmt.Sprintf("fault/%s/%s", f.kind, f.policy))
}

func (f fault) label() string {
	what := map[faultKind]string{
		domino:    "a slow node behind the balancer, its health check 200 OK",
		blackHole: "connect to a black hole",
		trickle:   fmt.Sprintf("a body trickling a byte a second (%d bytes)", trickleBytes),
	}[f.kind]
	guard := map[frontend.Policy]string{
		frontend.None:    "no timeout",
		frontend.Timeout: "3 s timeout",
		frontend.Breaker: "breaker + 3 s timeout",
	}[f.policy]
	return "fault: " + what + ": " + guard
}

// guarded: the front has its timeouts; such rows gate the claims.
func (f fault) guarded() bool { return f.policy != frontend.None }

// minSuccess is the success the row is held to, and why.
func (f fault) minSuccess() (float64, string) {
	switch {
	case f.kind == blackHole:
		return labresult.FailsByDesign, "no request can succeed: the connect never completes"
	case f.kind == trickle && f.guarded():
		return labresult.FailsByDesign, "no request can succeed: every body takes 4 s, past the 3 s timeout"
	case f.kind == domino && f.guarded():
		return dominoBound, fmt.Sprintf("held to %.0f%% success: one call in %d goes to the slow node and is cut at 3 s by design", dominoBound*100, dominoNodes)
	}
	return 0, "" // every answer comes within the client's wait
}

// faultGates are the guarded fault rows: they gate every claim.
func faultGates() []labresult.Key {
	var out []labresult.Key
	for _, f := range faults {
		if f.guarded() {
			out = append(out, f.key())
		}
	}
	return out
}

// The guarded fault rows whose p99 a target holds.
var (
	faultDominoTimeout    = fault{domino, frontend.Timeout}.key()
	faultDominoNone       = fault{domino, frontend.None}.key()
	faultBlackHoleTimeout = fault{blackHole, frontend.Timeout}.key()
	faultTrickleTimeout   = fault{trickle, frontend.Timeout}.key()
)

// faults runs the fault rows, each fault's rows on one dependency.
func (b *bench) faults(ctx context.Context) error {
	for _, run := range []func(context.Context) error{b.dominoRows, b.blackHoleRows, b.trickleRows} {
		if err := run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// dominoRows put the front in front of a balancer over dominoNodes backs,
// the last turned slow through its /fault endpoint once the balancer
// runs. The balancer has no active health check, nginx's passive one
// counts only errors and timeouts (60 s), and the built-in one none: the
// slow node stays in, and the rows poll its /healthz as a health check
// would, to show it answers 200 all along.
func (b *bench) dominoRows(ctx context.Context) error {
	t := faultTimingOf(b.run.Opts)
	var backs []*lab.Service
	defer func() {
		for _, s := range backs {
			s.Stop()
		}
	}()
	var addrs []string
	for range dominoNodes {
		s, err := b.run.StartService(ctx, "backend", 0, 0, backArgs(backend.Config{Delay: fastDelay})...)
		if err != nil {
			return err
		}
		backs, addrs = append(backs, s), append(addrs, s.Addr)
	}
	lb, err := b.run.StartLB(ctx, addrs, 0) // the balancer's defaults: a connection per request, as the front's
	if err != nil {
		return err
	}
	defer lb.Stop()
	slow := backs[len(backs)-1]
	if err := setFault(ctx, slow, url.Values{"delay": {t.slowNode.String()}}); err != nil {
		return err
	}
	b.run.SetEnv("domino", fmt.Sprintf("%s, round robin over %d backs answering in %s; the last turned slow (%s) by PUT /fault", lb.Kind, dominoNodes, fastDelay, t.slowNode))
	for _, f := range faults {
		if f.kind != domino {
			continue
		}
		stop := startHealthChecks(ctx, slow.URL("/healthz"))
		row, err := b.faultRow(ctx, f, lb.URL("/"), lab.Counter{Metric: slowNodeRequests, URL: slow.URL("/metrics"), Name: "backend_requests_total"})
		ok, checks := stop()
		if err != nil {
			return err
		}
		if checks > 0 {
			row.Set(healthChecksOK, float64(ok)/float64(checks))
		}
		if fr := row.Value(frontRequests); fr > 0 {
			row.Set(slowNodeShare, row.Value(slowNodeRequests)/fr)
		}
		row.AddNote("the slow node answered %d of %d health checks with 200 and got %.0f%% of the front's requests", ok, checks, 100*row.Value(slowNodeShare))
		b.add(row)
	}
	return nil
}

// blackHoleRows put the front in front of an address where connecting
// hangs.
func (b *bench) blackHoleRows(ctx context.Context) error {
	hole, err := backend.ListenConnectHole()
	if errors.Is(err, backend.ErrNoConnectHole) {
		return fmt.Errorf("%w: the black-hole rows need one (a listener whose full accept queue makes the kernel drop SYNs)", err)
	}
	if err != nil {
		return err
	}
	defer hole.Close()
	return b.rowsOf(ctx, blackHole, "http://"+hole.Addr()+"/")
}

// trickleRows put the front in front of a back that sends its headers at
// once and then its body a byte a second.
func (b *bench) trickleRows(ctx context.Context) error {
	back, err := b.run.StartService(ctx, "backend", 0, 0,
		backArgs(backend.Config{Mode: backend.Trickle, TrickleInterval: trickleEvery, BodyBytes: trickleBytes})...)
	if err != nil {
		return err
	}
	defer back.Stop()
	return b.rowsOf(ctx, trickle, back.URL("/"))
}

// rowsOf runs the fault rows of kind, each on a front of its own calling
// backURL.
func (b *bench) rowsOf(ctx context.Context, kind faultKind, backURL string) error {
	for _, f := range faults {
		if f.kind != kind {
			continue
		}
		row, err := b.faultRow(ctx, f, backURL)
		if err != nil {
			return err
		}
		b.add(row)
	}
	return nil
}

// add adds a row measured on its own to the result, keeping it for the
// notes.
func (b *bench) add(row *labresult.Row) {
	b.rows[row.Key] = row
	b.run.AddRow(row)
}

// faultRow runs f on a front of its own calling backURL: faultRate req/s
// for the fault timing's requests, each waited for as long as the
// clients wait. counters are read beside the front's own.
func (b *bench) faultRow(ctx context.Context, f fault, backURL string, counters ...lab.Counter) (*labresult.Row, error) {
	t := faultTimingOf(b.run.Opts)
	front, err := b.run.StartService(ctx, "frontend", frontCPU, frontMemMB, claimFront(f.policy, backURL).Args()...)
	if err != nil {
		return nil, err
	}
	defer front.Stop()
	bound, why := f.minSuccess()
	b.run.Progress.Step(b.run.Label(f.key()), t.load()+t.clientWait)
	row, err := b.run.Measure(ctx, lab.Measurement{
		Key: f.key(), Procs: []*sandbox.Process{front.Proc},
		Duration: t.load(), Repeat: 1, NoWarmup: true, MinSuccess: bound,
		Metrics:  []string{front.URL("/metrics")},
		Counters: append([]lab.Counter{{Metric: frontRequests, URL: front.URL("/metrics"), Name: "frontend_requests_total"}}, counters...),
		Driver: lab.HTTP{URL: front.URL("/"), Load: []loadgen.Option{loadgen.Rate(faultRate), loadgen.Requests(t.requests),
			loadgen.Connections(openConnsCap), loadgen.Timeout(t.clientWait)}},
	})
	if err != nil {
		return nil, err
	}
	row.Model = "fault"
	row.AddNote("%d requests at %d/s, each waited for up to %s: success %.2f%%, p99 %s, max %s; the front held up to %s goroutines",
		row.Requests, faultRate, t.clientWait, pct(row.SuccessRatio), msText(row.P99MS), msText(row.MaxMS), num(row.GoroutinesMax, 0))
	if why != "" {
		row.AddNote("%s", why)
	}
	return row, nil
}

// backArgs is the command line of a back with c: --slow-fraction given
// even when 0, since the flag's default is the report's 1 in 10.
func backArgs(c backend.Config) []string {
	args := c.Args()
	if c.SlowFraction == 0 {
		args = append(args, "--slow-fraction=0")
	}
	return args
}

// setFault changes a running back's behaviour (PUT /fault): the fields of
// q, the others kept.
func setFault(ctx context.Context, back *lab.Service, q url.Values) error {
	ctx, cancel := context.WithTimeout(ctx, faultControl)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, back.URL("/fault?"+q.Encode()), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("timeouts: PUT /fault on %s: %w", back.Name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("timeouts: PUT /fault on %s answered %s", back.Name, resp.Status)
	}
	return nil
}

// startHealthChecks polls url every healthEvery, each check waiting up to
// healthWait, as a balancer's health check would, until the returned stop
// is called; stop returns how many checks answered 200, of how many.
func startHealthChecks(ctx context.Context, url string) (stop func() (ok, total int)) {
	ctx, cancel := context.WithCancel(ctx)
	client := &http.Client{Timeout: healthWait}
	var wg sync.WaitGroup
	var ok, total int
	wg.Go(func() {
		tick := time.NewTicker(healthEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return
			}
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			if ctx.Err() != nil {
				return // stopped mid-check: not a check
			}
			total++
			if err == nil && resp.StatusCode == http.StatusOK {
				ok++
			}
		}
	})
	return func() (int, int) {
		cancel()
		wg.Wait()
		return ok, total
	}
}
