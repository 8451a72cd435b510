package timeoutsexp

import (
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/services/frontend"
)

// figures accounts for report E's figures (shared/REFERENCE.md).
func figures(o lab.Options) []lab.Figure {
	healthy := lab.NotRerunFigure("healthy back under siege: 1156.89 trans/s at 500 connections, 1283.61 at 1000, 100% available", "rerun in --full")
	closed500 := lab.NotRerunFigure("the closed model at 500 connections for every policy", "rerun in --full")
	if o.Mode == lab.Full {
		healthy.Rerun, healthy.Why = "rows: "+closedLabel(setupNamed("healthy"), 500)+"; "+closedLabel(setupNamed("healthy"), 1000), ""
		closed500.Rerun, closed500.Why = "every setup's closed row at 500 connections", ""
	}
	return []lab.Figure{
		healthy,
		closed500,
		lab.Rerun("10% slow, no timeout, 1000 concurrent: 853.93 trans/s, 100% available", "row: "+closedLabel(setupNamed("none"), 1000)),
		lab.Rerun("10% slow, 3 s timeout, 1000 concurrent: 1125.26 trans/s, 90.14% available", "row: "+closedLabel(setupNamed("timeout"), 1000)+"; claim 1"),
		lab.Rerun("memory at unequal rates: no timeout 853.60 tps, 194/349 MB; a timeout 1134.48 tps, 205/411 MB (the faster server looks hungrier)", "the two closed rows' memory, the ratio closed-1000-heap and a note; the report's correction is claim 2"),
		lab.Rerun("vegeta at 1000 req/s, no timeout: p50 171 ms, p95 10.06 s, p99 10.13 s, success 100%, heap 212/372 MB", "row: "+openLabel(setupNamed("none"))),
		lab.Rerun("vegeta at 1000 req/s, 3 s timeout: p50 163 ms, p95 3.05 s, p99 3.07 s, success 90%, heap 149/299 MB", "row: "+openLabel(setupNamed("timeout"))),
		lab.Rerun("about 30% less memory with a timeout at an equal rate", "claim 2"),
		lab.NotRerunFigure("vegeta's mean and max", "the report's text gives only p50, p95 and p99; each open row gives ours in vegeta's order, mean to max"),
		lab.Rerun("timeouts for connect, headers and a slow-trickling body, on every outward call", "the front's connect, header and body timeouts (policy "+string(frontend.Timeout)+" and all but none); tested in internal/services/frontend"),
		lab.NotRerunFigure("Node.js servers", "the front and back are Go (hlab serve frontend, backend); the front at 1 CPU like the report's one Node process"),
	}
}
