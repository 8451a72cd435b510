package timeoutsexp

import (
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/services/frontend"
)

// figures accounts for report E's figures and statements (shared/REFERENCE.md).
func figures(o lab.Options) []lab.Figure {
	healthy := lab.NotRerunFigure("healthy back under siege, about 3 min each: -c 500 1156.89 trans/s, 205382 successful transactions; -c 1000 1283.61 trans/s, 232141 successful; 100% available, 0 failed", "rerun in --full")
	drop := lab.NotRerunFigure("the 10% slow back cut the transaction rate by more than 30% (853.93 against 1283.61 trans/s at 1000 connections)", "rerun in --full: the healthy closed rows run there")
	closed500 := lab.NotRerunFigure("the closed model at 500 connections for every policy", "rerun in --full")
	if o.Mode == lab.Full {
		healthy.Rerun, healthy.Why = "rows: "+closedLabel(setupNamed("healthy"), 500)+"; "+closedLabel(setupNamed("healthy"), 1000), ""
		drop.Rerun, drop.Why = "rows: "+closedLabel(setupNamed("healthy"), 1000)+" and "+closedLabel(setupNamed("none"), 1000), ""
		closed500.Rerun, closed500.Why = "every setup's closed row at 500 connections", ""
	}
	return []lab.Figure{
		lab.Rerun("the back answers in 100 ms; 1 request in 10 takes 10 s (one shaky server of ten)", "every slow setup's back; the setup item "+itemBack),
		healthy,
		drop,
		closed500,
		lab.Rerun("10% slow, no timeout, siege -c 1000: 853.93 trans/s, 100% available, 154374 successful transactions, 0 failed", "row: "+closedLabel(setupNamed("none"), 1000)),
		lab.Rerun("10% slow, 3 s timeout (.timeout(3000), an SLA of 3 s), siege -c 1000: 1125.26 trans/s, 90.14% available, 209861 successful and 22964 failed transactions", "row: "+closedLabel(setupNamed("timeout"), 1000)+"; claim 1"),
		lab.Rerun("the front's memory at rest (heapUsed every 100 ms): Meas 18, min 3, max 4, avg 4 MB", "row: "+idleLabel),
		lab.Rerun("memory at unequal rates, 3 min at 1000 connections: no timeout 853.60 trans/s, Meas 1745, min 3, max 349, avg 194 MB; a timeout 1134.48 trans/s, Meas 1429, min 3, max 411, avg 205 MB (the faster front looked 5% hungrier)", "the two closed rows' memory, the ratio closed-1000-heap and a note; the report's correction is claim 2"),
		lab.Rerun("vegeta -rate 1000 for 3 min, no timeout: 180000 requests at 1000.01/s; latencies [mean, 50, 95, 99, max] 1.172619756 s, 170.947889 ms, 10.062145485 s, 10.134037994 s, 10.766903205 s; success 100%, 200:180000; 1080000 bytes in (6.00 a request)", "row: "+openLabel(setupNamed("none"))),
		lab.Rerun("vegeta -rate 1000 for 3 min, 3 s timeout: 180000 requests at 1000.01/s; latencies [mean, 50, 95, 99, max] 455.780741 ms, 162.876833 ms, 3.047947339 s, 3.070030628 s, 3.669993753 s; success 90.00%, 500:18000 and 200:162000; 1142472 bytes in (6.35 a request)", "row: "+openLabel(setupNamed("timeout"))),
		lab.Rerun("the mean latency at an equal 1000 req/s: 455.78 ms with a timeout against 1.17 s without (0.39)", "claim 3"),
		lab.Rerun("heap at an equal 1000 req/s, 3 min: no timeout Meas 1818, min 3, max 372, avg 212 MB; a timeout Meas 1886, min 3, max 299, avg 149 MB", "the open rows' heap, beside the report's"),
		lab.Rerun("about 30% less memory on average with a timeout at an equal rate", "claim 2"),
		lab.NotRerunFigure("vegeta's bytes in (6.00 a request without a timeout, 6.35 with: the 500s' bodies)", "the load generator counts requests, statuses and latency, not bytes; the front's answers are the back's 64-byte body, or a one-line reason on failure"),
		lab.NotRerunFigure("users' attention fades after 1-2 s and is gone past 4-5 s, hence the 3 s SLA", "a statement about users, which the report cites and does not measure"),
		lab.Rerun("the domino effect: a node that got slow still answers its health check with 200 OK, so the balancer keeps it, and the fronts behind it need more memory and serve fewer requests", "rows fault: a slow node behind the balancer (no timeout, 3 s timeout, breaker + 3 s timeout), each with the slow node's health checks and share of the calls, and the target fault-domino-p99; the fronts' memory under a slow tail: claim 2"),
		lab.Rerun("a port that drops every packet: the TCP connect times out (time curl example.com:81)", "rows fault: connect to a black hole (no timeout, 3 s timeout) and the target fault-blackhole-p99"),
		lab.Rerun("an answer that sends its packets very slowly needs a read timeout", "rows fault: a body trickling a byte a second (no timeout, 3 s timeout) and the target fault-trickle-p99"),
		lab.Rerun("timeouts on every call to an external system, not only HTTP", "the front's connect, header and body timeouts (policy "+string(frontend.Timeout)+" and all but none); every service of the lab bounds its outward calls"),
		lab.Rerun("benchmark hygiene: the load tool on another machine, memory not logged by the process, runs longer than 3 min, a quiet machine", "the method: the load generator runs outside the front's quota (on the same 2 cores), the lab reads memory from outside the front, --full runs 3 min, and every row records the CPU used outside the lab (noisy)"),
		lab.NotRerunFigure("Node.js servers (mhart/alpine-node:7.1) and unirest", "the front and back are Go (hlab serve frontend, backend); the front at 1 CPU like the report's one Node process; see the setup"),
	}
}
