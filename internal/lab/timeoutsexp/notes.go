package timeoutsexp

import (
	"fmt"
	"math"
	"strings"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/frontend"
)

// rowNote gives what the table has no column for: the tail, the memory,
// the extra load on the back, and the report's figures.
func rowNote(r *labresult.Row, st step) string {
	var parts []string
	// vegeta's order: mean, 50, 90, 95, 99, max.
	parts = append(parts, fmt.Sprintf("latency mean %s, p50 %s, p90 %s, p95 %s, p99 %s, max %s",
		msText(r.MeanMS), msText(r.P50MS), msText(r.P90MS), msText(r.P95MS), msText(r.P99MS), msText(r.MaxMS)))
	if st.conns == 0 {
		parts = append(parts, fmt.Sprintf("%d requests sent at %d/s for %v (%d late; the rps column counts to the last answer, drain included)",
			r.Requests, openRate, st.run, r.Late))
	}
	if r.HeapMBAvg != nil {
		parts = append(parts, fmt.Sprintf("front heap %s/%s MB, RSS %s/%s MB (avg/max, %v-%v into the run), goroutines %s",
			num(r.HeapMBAvg, 1), num(r.HeapMBMax, 1), num(r.RSSMBAvg, 1), num(r.RSSMBMax, 1), st.from, st.to, num(r.GoroutinesAvg, 0)))
	}
	if r.Requests > 0 && float64(r.Late) > 0.05*float64(r.Requests) {
		parts = append(parts, fmt.Sprintf("WARNING: the load generator sent %.0f%% of requests more than 10 ms late: the machine was busy, and latencies (timed from the intended send) carry that wait",
			100*float64(r.Late)/float64(r.Requests)))
	}
	if x := r.Get(extraBackRequests); x != nil {
		parts = append(parts, fmt.Sprintf("back requests per front request %.3f (%+.1f%%)", 1+*x, 100**x))
		if st.s.policy == frontend.Hedge {
			parts = append(parts, fmt.Sprintf("hedges the budget refused: %.0f", r.Value(hedgesDenied)))
		}
	}
	if ref := r.Ref; ref != nil {
		parts = append(parts, "report: "+refText(ref, st))
	}
	return strings.Join(parts, "; ")
}

// refText gives the report's figures for st's row.
func refText(ref *labresult.Ref, st step) string {
	var rp []string
	if ref.RPS != nil && st.conns > 0 {
		rp = append(rp, fmt.Sprintf("%.2f trans/s", *ref.RPS))
	}
	if ref.SuccessRatio != nil {
		rp = append(rp, fmt.Sprintf("%.2f%% available", *ref.SuccessRatio*100))
	}
	if ref.P50MS != nil { // vegeta's order: mean, 50, 95, 99, max
		rp = append(rp, fmt.Sprintf("latency mean %s, p50 %s, p95 %s, p99 %s, max %s",
			msText(ref.MeanMS), msText(ref.P50MS), msText(ref.P95MS), msText(ref.P99MS), msText(ref.MaxMS)))
	}
	if ref.HeapMBAvg != nil {
		what := "heap"
		if st.conns > 0 {
			what = "memory" // siege's run: the report does not say which
		}
		rp = append(rp, fmt.Sprintf("%s %s/%s MB", what, num(ref.HeapMBAvg, 0), num(ref.HeapMBMax, 0)))
	}
	return strings.Join(rp, ", ")
}

func msText(v *float64) string {
	switch {
	case v == nil:
		return "-"
	case *v >= 1000:
		return fmt.Sprintf("%.2f s", *v/1000)
	default:
		return fmt.Sprintf("%.0f ms", *v)
	}
}

func num(v *float64, prec int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, *v)
}

func pct(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v * 100
}

// conclude notes why the figures read as they do (the claims, targets
// and ratios judge them), and what quick mode left out.
func (b *bench) conclude() {
	run := b.run
	run.Note("closed model, 1000 connections: here the closed model is bound by Little's law, connections / mean latency (about 1000/0.39 s = %.0f/s with the timeout, 1000/1.09 s = %.0f/s without), not by the front's CPU as in the report (1125 vs 854 trans/s, 1.32x), so the first claim's ratio is larger than the report's",
		1000/(0.9*fastDelay.Seconds()+0.1*deadline.Seconds()), 1000/(0.9*fastDelay.Seconds()+0.1*slowDelay.Seconds()))
	run.Note("memory at unequal rates (closed model, 1000 connections) is the report's first comparison (205 vs 194 MB at 1134 vs 854 tps: the faster front looked hungrier; ratio closed-1000-heap here). At unequal rates the figure mixes memory per request with the rate; the report then compares at an equal rate, which the second claim reruns")
	if on, ot := b.rows[openNone], b.rows[openTimeout]; on != nil && ot != nil {
		run.Note("open model at %d req/s: goroutines %s with a 3 s timeout vs %s with none: without a timeout every slow answer holds a request, two connections and their goroutines for 10 s instead of 3 (the heap is the second claim, the RSS ratio open-1000-rss)",
			openRate, num(ot.GoroutinesAvg, 0), num(on.GoroutinesAvg, 0))
	}
	var others []string
	for _, name := range []string{"breaker", "adaptive"} {
		if r := b.rows[openKey(setupNamed(name))]; r != nil && r.SuccessRatio != nil {
			others = append(others, fmt.Sprintf("%s: success %.2f%%, p99 %s, heap %s MB", name, pct(r.SuccessRatio), msText(r.P99MS), num(r.HeapMBAvg, 1)))
		}
	}
	if len(others) > 0 {
		run.Note("against partial slowness (open model): %s. A breaker only opens when most calls fail, not for 10%% of them, so it behaves as the timeout alone; so does the adaptive limit, which follows the median time of the calls (a slow tail does not move it) and sheds (503) only when the back slows down as a whole. The breaker's case is a back that stops answering: see the black-hole tests in internal/services/frontend", strings.Join(others, "; "))
	}
	b.concludeFaults()
	if run.Opts.Mode != lab.Full {
		run.Note("quick mode: the closed model only at 1000 connections for none and timeout (the claim), 20 s and 10 s, ended at their duration (the start-up transient makes such short runs read a few %% high); every setup in the open model for 5 s (13 s without a timeout), memory sampled once in flight had settled; one run per row outside the claims (--repeat N for more); each fault row sends %d requests at %d req/s. --full adds the closed model at 500 and 1000 connections for every setup and runs every row for 3 min, as the report's siege and vegeta ran, and the fault rows for %s",
			faultTimingOf(run.Opts).requests, faultRate, faultTimingOf(lab.Options{Mode: lab.Full}).load())
	}
	run.Note("requests in the open model are timed from their intended send time (no coordinated omission); the load generator runs outside the front's quota and waits up to %v for an answer; no separate warm-up: memory is sampled only once requests in flight have settled, and the closed runs are long against the stall", loadTimeout)
}

// concludeFaults says what the fault rows show together: the slow node
// stayed behind the balancer, and what the front's breaker did about it.
func (b *bench) concludeFaults() {
	none, timeout, breaker := b.rows[faultDominoNone], b.rows[faultDominoTimeout], b.rows[fault{domino, frontend.Breaker}.key()]
	if none == nil || timeout == nil || breaker == nil {
		return
	}
	b.run.Note("the domino effect: the balancer kept sending the slow node %.0f%% of the calls while it answered %.0f%% of its health checks with 200; without a timeout the front's callers waited for the slow node's answers (p99 %s), with one the front answered them in 3 s (p99 %s). "+
		"The front's breaker opens only once half the calls in its window fail, and here a third do: with it, success %.2f%% and p99 %s, against %.2f%% and %s with the timeout alone. What takes a slow node out is the balancer's own health check timing its answers (or outlier detection), which neither nginx's open-source passive check nor the built-in balancer does. "+
		"The fault rows' load (%s) is too short for the calls a front holds to pile up as in the open rows above: their figures are how soon each request ended, not the front's memory",
		100*none.Value(slowNodeShare), 100*none.Value(healthChecksOK), msText(none.P99MS), msText(timeout.P99MS),
		pct(breaker.SuccessRatio), msText(breaker.P99MS), pct(timeout.SuccessRatio), msText(timeout.P99MS), faultTimingOf(b.run.Opts).load())
}
