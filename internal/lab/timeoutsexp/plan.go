package timeoutsexp

import (
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/frontend"
)

// setup is a back and a front policy.
type setup struct {
	name   string // in the rows' keys
	label  string
	slow   bool
	policy frontend.Policy
}

var setups = []setup{
	{"healthy", "healthy back, no timeout", false, frontend.None},
	{"none", "10% slow, no timeout", true, frontend.None},
	{"timeout", "10% slow, 3 s timeout", true, frontend.Timeout},
	{"breaker", "10% slow, breaker + timeout", true, frontend.Breaker},
	{"hedge", "10% slow, hedge + timeout", true, frontend.Hedge},
	{"adaptive", "10% slow, adaptive limit + timeout", true, frontend.Adaptive},
}

func setupNamed(name string) setup {
	for _, s := range setups {
		if s.name == name {
			return s
		}
	}
	panic("timeoutsexp: no setup " + name)
}

// Row keys: the setup, the model and its parameter.
func closedKey(s setup, conns int) labresult.Key {
	return labresult.Key(fmt.Sprintf("%s/closed/c%d", s.name, conns))
}
func openKey(s setup) labresult.Key {
	return labresult.Key(fmt.Sprintf("%s/open/r%d", s.name, openRate))
}

func closedLabel(s setup, conns int) string {
	return fmt.Sprintf("%s: closed, %d connections", s.label, conns)
}
func openLabel(s setup) string { return fmt.Sprintf("%s: open, %d req/s", s.label, openRate) }

// The rows the claims, targets and notes name.
var (
	closedNone    = closedKey(setupNamed("none"), 1000)
	closedTimeout = closedKey(setupNamed("timeout"), 1000)
	openHealthy   = openKey(setupNamed("healthy"))
	openNone      = openKey(setupNamed("none"))
	openTimeout   = openKey(setupNamed("timeout"))
	openHedge     = openKey(setupNamed("hedge"))
)

// step is one row to measure.
type step struct {
	s     setup
	conns int // closed model; 0: open model at openRate
	// run is the load's duration; from/to the steady-state sampling window.
	run, from, to time.Duration
}

func (st step) key() labresult.Key {
	if st.conns > 0 {
		return closedKey(st.s, st.conns)
	}
	return openKey(st.s)
}

func (st step) label() string {
	if st.conns > 0 {
		return closedLabel(st.s, st.conns)
	}
	return openLabel(st.s)
}

// isClaim says whether st is a row of a claim (none or timeout, at 1000
// connections or in the open model): those run in rounds on services
// started once; every other row starts fresh services.
func (st step) isClaim() bool {
	return (st.s.name == "none" || st.s.name == "timeout") && (st.conns == 0 || st.conns == 1000)
}

// plan lists the rows: the open model first (the healthy row, whose tail
// the hedge delay is set against, before the rest), then the closed one.
func plan(o lab.Options) []step {
	var steps []step
	if o.Mode == lab.Full {
		// The report's vegeta and siege ran about 3 minutes each.
		for _, s := range setups {
			steps = append(steps, openStep(s, 180*time.Second, 15*time.Second))
		}
		for _, conns := range []int{500, 1000} {
			for _, s := range setups {
				steps = append(steps, closedStep(s, conns, 180*time.Second))
			}
		}
		return steps
	}
	// Quick: every setup in the open model, each just past its steady state;
	// the closed model only where the claim needs it.
	for _, s := range setups {
		switch {
		case !s.slow:
			steps = append(steps, openStep(s, 5*time.Second, 2*time.Second))
		case s.policy == frontend.None:
			// In flight grows for 10 s (the slow answers), then holds.
			steps = append(steps, openStep(s, 13*time.Second, slowDelay+500*time.Millisecond))
		default:
			steps = append(steps, openStep(s, 5*time.Second, deadline+200*time.Millisecond))
		}
	}
	steps = append(steps,
		closedStep(setupNamed("none"), 1000, 20*time.Second),
		closedStep(setupNamed("timeout"), 1000, 10*time.Second))
	return steps
}

// closedStep samples memory once the slow answers in flight have settled:
// after the slow delay without a timeout, the deadline with one.
func closedStep(s setup, conns int, run time.Duration) step {
	from := deadline + 200*time.Millisecond
	switch {
	case !s.slow:
		from = 2 * time.Second
	case s.policy == frontend.None:
		from = slowDelay + 500*time.Millisecond
	}
	return step{s: s, conns: conns, run: run, from: from, to: run}
}

func openStep(s setup, run, from time.Duration) step {
	return step{s: s, run: run, from: from, to: run}
}

// drainOf is how long answers may still come after a run of st.
func drainOf(st step) time.Duration {
	switch {
	case !st.s.slow:
		return 0
	case st.s.policy == frontend.None:
		return slowDelay
	}
	return deadline
}

// ref is the report's figures for st's row (REFERENCE.md, E), nil where
// it gives none. vegeta's latencies are quoted to the microsecond it
// printed.
func (st step) ref() *labresult.Ref {
	f := labresult.F
	switch name := st.s.name; {
	case st.conns == 0 && name == "none":
		return &labresult.Ref{MeanMS: f(1172.619756), P50MS: f(170.947889), P95MS: f(10062.145485), P99MS: f(10134.037994), MaxMS: f(10766.903205),
			SuccessRatio: f(1), HeapMBAvg: f(212), HeapMBMax: f(372)}
	case st.conns == 0 && name == "timeout":
		return &labresult.Ref{MeanMS: f(455.780741), P50MS: f(162.876833), P95MS: f(3047.947339), P99MS: f(3070.030628), MaxMS: f(3669.993753),
			SuccessRatio: f(0.90), HeapMBAvg: f(149), HeapMBMax: f(299)}
	case name == "healthy" && st.conns == 500:
		return &labresult.Ref{RPS: f(1156.89), SuccessRatio: f(1)}
	case name == "healthy" && st.conns == 1000:
		return &labresult.Ref{RPS: f(1283.61), SuccessRatio: f(1)}
	case name == "none" && st.conns == 1000:
		// The memory was measured in another siege run, at 853.60 tps.
		return &labresult.Ref{RPS: f(853.93), SuccessRatio: f(1), HeapMBAvg: f(194), HeapMBMax: f(349)}
	case name == "timeout" && st.conns == 1000:
		// The memory: at 1134.48 tps.
		return &labresult.Ref{RPS: f(1125.26), SuccessRatio: f(0.9014), HeapMBAvg: f(205), HeapMBMax: f(411)}
	}
	return nil
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	var d time.Duration
	for _, st := range plan(o) {
		runs := time.Duration(o.Repeats())
		if st.isClaim() {
			runs = lab.DefaultMinRounds
		}
		d += runs*(st.run+drainOf(st)) + 400*time.Millisecond // two services start and stop
	}
	d += idleSampling
	t := faultTimingOf(o)
	for _, f := range faults {
		d += t.load() + faultDrain(f, t) + 300*time.Millisecond // a front starts and stops
	}
	return d + 2*time.Second // the balancer, its backs and the trickling back
}

// faultDrain is how long the last answers of fault row f take.
func faultDrain(f fault, t faultTiming) time.Duration {
	switch {
	case f.kind == blackHole && f.guarded():
		return frontend.DefaultConnectTimeout
	case f.guarded():
		return deadline
	case f.kind == domino:
		return t.slowNode
	case f.kind == trickle:
		return trickleBytes * trickleEvery
	}
	return t.clientWait
}
