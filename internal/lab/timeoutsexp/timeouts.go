// Package timeoutsexp is report E's experiment: a front service (hlab
// serve frontend, 1 CPU like the report's one Node process) calls a back
// service (hlab serve backend, unconstrained) that answers in 100 ms,
// except 1 request in 10 that takes 10 s. It measures, side by side, the
// front with no timeout (the report's baseline), with a 3 s timeout (the
// report's fix), and with what the field offers beyond it: a circuit
// breaker, hedged requests under a budget, and an adaptive concurrency
// limit.
//
// The closed model (siege: N connections, each sending its next request
// when the previous one is answered) gives transactions/s and
// availability; the open model at a fixed 1000 req/s (vegeta) gives
// latency and success at equal throughput, where the front's memory (RSS
// and Go heap, sampled every 100 ms in the steady state) can be compared:
// the report's lesson on method. The front is also sampled at rest.
//
// Fault rows (faults.go) measure what the report's closing sections warn
// of: a node that got slow behind a balancer whose health check still
// gets 200 OK from it, a connect that never completes, a body that
// trickles in; each with and without the front's timeouts. The setup
// beside the report's is declared item by item (setup.go), and what the
// first claim's services and load are started with is held to it.
package timeoutsexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/frontend"
)

// The report's setup.
const (
	frontCPU     = 1.0  // one Node process
	frontMemMB   = 1024 // a ceiling, far above what any setup uses
	openRate     = 1000 // vegeta -rate 1000
	slowFraction = 0.1  // 1 request in 10 ...
	slowDelay    = 10 * time.Second
	fastDelay    = 100 * time.Millisecond
	deadline     = frontend.DefaultTimeout // 3 s, the report's timeout
	loadTimeout  = 30 * time.Second        // the clients wait for the slowest answer (siege and vegeta did)
	openConnsCap = 5000                    // above the ~1100 requests in flight without a timeout
)

// successBound is what a row with a 3 s timeout must answer: 1 request in
// 10 takes 10 s, so about 90% succeed by design (the report: 90.14%).
const successBound = 0.85

// Experiment is report E's timeouts experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

// The claims' rounds: at least claimMinRounds, and one more when the
// interval has not decided by then.
const (
	claimMinRounds = lab.DefaultMinRounds
	claimMaxRounds = lab.DefaultMinRounds + 1
)

func (*Experiment) Spec(o lab.Options) lab.Spec {
	rows := []lab.RowSpec{lab.RefRow(idleKey, idleLabel, idleRef)}
	for _, st := range plan(o) {
		rows = append(rows, lab.RefRow(st.key(), st.label(), st.ref()))
	}
	for _, f := range faults {
		rows = append(rows, lab.Row(f.key(), f.label()))
	}
	return lab.Spec{
		Name:    "timeouts",
		Title:   "a 10%-slow dependency: no timeout vs timeout, breaker, hedging, adaptive limit; a slow node behind a balancer, a black hole, a trickle (report E)",
		Rows:    rows,
		Claims:  claims(),
		Targets: targets,
		Metrics: metrics,
		Figures: figures(o),
		Setup:   setupItems(o),
	}
}

// claims are the report's, each gated by the fault rows where the front
// has its timeouts.
func claims() []labresult.Claim {
	gates := faultGates()
	return []labresult.Claim{{
		Text:   "closed model, 1000 connections, 10% slow back: a 3 s timeout serves >= 1.3x the transactions/s of no timeout",
		Ratio:  labresult.Ratio{Num: closedTimeout, Den: closedNone, Metric: labresult.RPS.Name},
		Bound:  labresult.AtLeast(1.3),
		Report: "1125.26 / 853.93 = 1.32 (siege)", ReportRatio: 1125.26 / 853.93,
		Gates: gates,
	}, {
		Text:   "open model at an equal 1000 req/s: the front's average Go heap with a 3 s timeout is >= 25% lower than with none",
		Ratio:  labresult.Ratio{Num: openTimeout, Den: openNone, Metric: labresult.HeapMBAvg.Name},
		Bound:  labresult.AtMost(0.75),
		Report: "149 / 212 = 0.70 (vegeta)", ReportRatio: 149.0 / 212,
		Gates: gates,
	}, {
		// vegeta's mean is where the timeout shows most plainly: the slow
		// tenth answers (with 500) at 3 s instead of 10 s. By the delays
		// alone the ratio is (0.9 x 0.1 + 0.1 x 3) / (0.9 x 0.1 + 0.1 x 10)
		// = 0.36.
		Text:   "open model at an equal 1000 req/s: the mean latency with a 3 s timeout is at most half that with none",
		Ratio:  labresult.Ratio{Num: openTimeout, Den: openNone, Metric: labresult.MeanMS.Name},
		Bound:  labresult.AtMost(0.5),
		Report: "455.780741 ms / 1.172619756 s = 0.39 (vegeta)", ReportRatio: 455.780741 / 1172.619756,
		Gates: gates,
	}}
}

// targets are ours, beyond the report: hedging's three bounds, the fault
// rows' bounds on how soon the front fails, and the ratios of memory the
// report compares that no claim judges.
var targets = []labresult.Target{{
	Key:  "hedge-success",
	Text: "beyond the report, hedging (open model, 1000 req/s): >= 99% of requests answered, as a hedge sent after 150 ms races each slow call instead of waiting 3 s for the timeout; hedging holds when this, hedge-p99 and hedge-extra-load all hold",
	Row:  openHedge, Metric: labresult.SuccessRatio.Name, Bound: labresult.AtLeast(0.99),
}, {
	Key:  "hedge-p99",
	Text: "beyond the report, hedging (open model, 1000 req/s): p99 <= 1 s, a tenth of the slow calls' 10 s (one of hedging's three targets)",
	Row:  openHedge, Metric: labresult.P99MS.Name, Bound: labresult.AtMost(1000),
}, {
	Key:  "hedge-extra-load",
	Text: "beyond the report, hedging (open model, 1000 req/s): at most 15% extra requests on the back, which the hedge budget must keep from doubling the load on a struggling dependency (one of hedging's three targets)",
	Row:  openHedge, Metric: extraBackRequests.Name, Bound: labresult.AtMost(0.15),
}, {
	Key:  "fault-domino-p99",
	Text: "the domino effect, with the 3 s timeout: p99 <= 3.5 s although the balancer keeps sending a third of the calls to a node that answers in 10 s (its health check answers 200)",
	Row:  faultDominoTimeout, Metric: labresult.P99MS.Name, Bound: labresult.AtMost(3500),
}, {
	Key:  "fault-blackhole-p99",
	Text: "a connect to a black hole, with the front's timeouts: p99 <= 1.5 s, the 1 s connect timeout and a margin (without one, the front waits as long as its client)",
	Row:  faultBlackHoleTimeout, Metric: labresult.P99MS.Name, Bound: labresult.AtMost(1500),
}, {
	Key:  "fault-trickle-p99",
	Text: "a body trickling a byte a second, with the front's timeouts: p99 <= 3.5 s, the 3 s bound on the call and a margin (without one, the front waits for the last byte)",
	Row:  faultTrickleTimeout, Metric: labresult.P99MS.Name, Bound: labresult.AtMost(3500),
}, {
	Key:   "closed-1000-heap",
	Text:  "memory at unequal rates, the report's first comparison (closed model, 1000 connections): the front's average Go heap with a 3 s timeout over none (report: 205 / 194 MB = 1.06 at 1134 vs 854 tps: the faster front looked hungrier)",
	Ratio: &labresult.Ratio{Num: closedTimeout, Den: closedNone, Metric: labresult.HeapMBAvg.Name},
}, {
	Key:   "open-1000-rss",
	Text:  "open model at 1000 req/s: the front's average RSS with a 3 s timeout over none",
	Ratio: &labresult.Ratio{Num: openTimeout, Den: openNone, Metric: labresult.RSSMBAvg.Name},
}}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	setEnv(run)
	b := &bench{run: run, steps: plan(run.Opts), rows: map[labresult.Key]*labresult.Row{},
		// The hedge waits the front's default, 150 ms: 1.5x the back's 100 ms
		// answers, "near its p95" with a margin. The healthy p99 measured here
		// has none: on a busy machine healthy answers cross it and get hedged.
		hedgeDelay: frontend.DefaultHedgeDelay}
	defer b.stop()
	if err := b.claimRows(ctx); err != nil {
		return err
	}
	if err := b.otherRows(ctx); err != nil {
		return err
	}
	for _, st := range b.steps { // in the plan's order
		run.AddRow(b.rows[st.key()])
	}
	if err := b.faults(ctx); err != nil {
		return err
	}
	b.conclude()
	return nil
}

func setEnv(run *lab.Run) {
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("front", fmt.Sprintf("hlab serve frontend, %.0f CPU, %d MB (GOMAXPROCS follows the quota)", frontCPU, frontMemMB))
	run.SetEnv("back", fmt.Sprintf("hlab serve backend, unconstrained: answers in %v, %.0f%% of requests in %v", fastDelay, slowFraction*100, slowDelay))
	run.SetEnv("load", fmt.Sprintf("hlab load: closed model (siege -c N), open model at %d req/s (vegeta); client timeout %v", openRate, loadTimeout))
	run.SetEnv("policies", fmt.Sprintf("failsafe-go: timeout %v (+ connect %v, headers %v, body %v); breaker %.0f%% of >= %d calls in %v, open %v; hedge up to %d, budget %.0f%% of calls in flight; adaptive limit %d-%d (starting at the highest, following the median call time) over the breaker",
		deadline, frontend.DefaultConnectTimeout, frontend.DefaultHeaderTimeout, frontend.DefaultBodyTimeout,
		frontend.DefaultBreakerFailureRate*100, frontend.DefaultBreakerMinRequests, frontend.DefaultBreakerWindow, frontend.DefaultBreakerDelay,
		frontend.DefaultMaxHedges, frontend.DefaultHedgeBudget*100, frontend.DefaultLimitMin, frontend.DefaultLimitMax))
	run.SetEnv("method", "each claim's rows (no timeout and a 3 s timeout) run in rounds, their order alternating, on a front and back started once per setup, each run starting once the front has nothing in flight; every other row starts a fresh front and back")
}

// bench is what the phases share: the plan, the rows measured so far (by
// key; they join the result in the plan's order once all are measured),
// and the claims' services, which run until the experiment ends.
type bench struct {
	run        *lab.Run
	steps      []step
	rows       map[labresult.Key]*labresult.Row
	hedgeDelay time.Duration
	claimPairs map[string]*pair // by setup name
}

func (b *bench) stop() {
	for _, p := range b.claimPairs {
		p.stop()
	}
}

// claimRows measures the claims' rows in rounds on one front and back per
// setup, no timeout and a 3 s timeout: the open model's pair, then the
// closed model's. Each run starts once the front has nothing in flight.
func (b *bench) claimRows(ctx context.Context) error {
	b.claimPairs = map[string]*pair{}
	for _, name := range []string{"none", "timeout"} {
		p, err := startPair(ctx, b.run, setupNamed(name), b.hedgeDelay)
		if err != nil {
			return err
		}
		b.claimPairs[name] = p
	}
	b.firstClaimSetup()
	// The front at rest first, before any load has grown its heap.
	idle, err := b.idleRow(ctx, b.claimPairs["none"])
	if err != nil {
		return err
	}
	b.add(idle)
	var open, closed []step
	for _, st := range b.steps {
		switch {
		case !st.isClaim():
		case st.conns == 0:
			open = append(open, st)
		default:
			closed = append(closed, st)
		}
	}
	b.run.UsedInFirstClaim(itemClosedLoad, closedLoadText(closed)) // as measurement passes it
	for _, set := range [][]step{open, closed} {
		ms := make([]lab.Measurement, len(set))
		for i, st := range set {
			ms[i] = measurement(b.claimPairs[st.s.name], st, b.run.Opts)
		}
		measured, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms, MinRounds: claimMinRounds, MaxRounds: claimMaxRounds,
			Around: func(i int, measure func() error) error {
				if err := b.claimPairs[set[i].s.name].settle(ctx, drainOf(set[i])+2*time.Second); err != nil {
					return err
				}
				return measure()
			}})
		if err != nil {
			return err
		}
		for i, row := range measured {
			finish(row, set[i])
			b.rows[row.Key] = row
		}
	}
	return nil
}

// firstClaimSetup records what the first claim's services were started
// with, and the clients' wait and rounds their rows run with, against the
// Spec's setup (the closed-model load: claimRows).
func (b *bench) firstClaimSetup() {
	run, none, timeout := b.run, b.claimPairs["none"], b.claimPairs["timeout"]
	for _, p := range []*pair{none, timeout} {
		run.UsedInFirstClaim(itemBack, backText(p.bc))
		run.UsedInFirstClaim(itemInflight, inflightText(p.fc))
		run.UsedInFirstClaim(itemConns, connText(p.fc))
		run.UsedInFirstClaim(itemFrontQuota, quotaText(p.frontCPU, p.frontMemMB))
		run.UsedInFirstClaim(itemBackQuota, quotaText(p.backCPU, p.backMemMB))
	}
	run.UsedInFirstClaim(itemFrontNone, frontText(none.fc))
	run.UsedInFirstClaim(itemFrontTimeout, frontText(timeout.fc))
	run.UsedInFirstClaim(itemClientWait, durText(loadTimeout))
	run.UsedInFirstClaim(itemRounds, roundsText(claimMinRounds, claimMaxRounds))
}

// otherRows measures every row outside the claims, each on a fresh front
// and back: a front's memory must not carry over from an earlier load.
func (b *bench) otherRows(ctx context.Context) error {
	for _, st := range b.steps {
		if st.isClaim() {
			continue
		}
		if st.s.policy == frontend.Hedge {
			healthy := "not measured"
			if h := b.rows[openHealthy]; h != nil && h.P95MS != nil && h.P99MS != nil {
				healthy = fmt.Sprintf("p95 %.1f ms, p99 %.1f ms", *h.P95MS, *h.P99MS)
			}
			b.run.SetEnv("hedge_delay", fmt.Sprintf("%v (the front's default, 1.5x the back's %v answers; the healthy row here: %s)", b.hedgeDelay, fastDelay, healthy))
		}
		row, err := b.measureFresh(ctx, st)
		if err != nil {
			return err
		}
		b.rows[row.Key] = row
	}
	return nil
}

// measureFresh starts a fresh back and front, runs st and stops them.
func (b *bench) measureFresh(ctx context.Context, st step) (*labresult.Row, error) {
	p, err := startPair(ctx, b.run, st.s, b.hedgeDelay)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	row, err := b.run.Measure(ctx, measurement(p, st, b.run.Opts))
	if err != nil {
		return nil, err
	}
	finish(row, st)
	return row, nil
}

// finish adds what the row's counters say and its note.
func finish(row *labresult.Row, st step) {
	// Only where every request ran to its end: a cut run abandons some.
	if f, b := row.Value(frontRequests), row.Value(backRequests); f > 0 && st.conns == 0 {
		row.Set(extraBackRequests, b/f-1)
	}
	row.AddNote("%s", rowNote(row, st))
	if st.s.slow && st.s.policy != frontend.None {
		row.AddNote("held to %.0f%% success: 1 request in 10 takes 10 s and is cut at 3 s by design", successBound*100)
	}
}
