package scaleexp

import "github.com/highload-lab/hlab/internal/lab"

// figures accounts for report A1's figures and statements
// (shared/reports/000, shared/REFERENCE.md).
func figures() []lab.Figure {
	return []lab.Figure{
		lab.Rerun("one instance, 1 thread 1 connection: 169 rps, 22.55 ms mean, 91.44 ms max", "row: one instance, 1 connection"),
		lab.Rerun("one instance, 3 threads 3 connections: 74 rps, 45.85 ms mean, 195.06 ms max", "row: one instance, 3 connections"),
		lab.Rerun("three instances + LB, 1 connection: 450 rps, 9.09 ms mean, 68.66 ms max", "row: three instances + LB, 1 connection"),
		lab.Rerun("three instances + LB, 3 connections: 325 rps, 22.41 ms mean, 95.08 ms max", "row: three instances + LB, 3 connections"),
		lab.Rerun("replicas multiply throughput (450/169 = 2.66 at 1 connection, 325/74 = 4.39 at 3)", "claims 1 and 2"),
		lab.Rerun("replicas cut latency", "the mean column of the four rows, beside the report's"),
		lab.Rerun("each figure an average over dozens of runs", "the claims' rows run in alternating rounds until the verdict's interval is decided"),
		lab.Rerun("nginx round robin with the report's config (upstream app { server app1:8890; ... } and proxy_pass http://app)", "setup: the balancer config the claims' rows run"),
		lab.NotRerunFigure("wrk's latency standard deviations (28.32, 42.16, 13.99, 26.86 ms) and per-thread Req/Sec (169.56, 25.06, 451.82, 109.03 avg)",
			"the lab reports percentiles and one rate per row; a standard deviation of a skewed latency says little, and per-thread rates are wrk's bookkeeping"),
		lab.NotRerunFigure("wrk's totals: 854 requests in 5.05 s (93.41 KB), 377 in 5.06 s (41.23 KB), 2251 in 5.00 s (347.31 KB), 1631 in 5.01 s (251.66 KB)",
			"each row counts its requests (Requests) over runs of its own length; bytes are not counted: every answer is the same 5-byte body"),
		lab.Rerun("if one replica falls, the others keep working", "fault rows: one of three replicas SIGKILLed under load (behind nginx when it runs, and the built-in balancer), and their targets"),
		lab.Rerun("the load balancer becomes the single point of failure", "fault row: the balancer SIGKILLed under load and started again 1 s later, and its target"),
		lab.NotRerunFigure("replicas can be added and removed automatically by load (Kubernetes, Docker Swarm)", "orchestration, not a property of the pattern the lab can measure on one machine: the lab runs a fixed three"),
		lab.NotRerunFigure("only for stateless services", "a caveat, not a measurement: the service keeps no state"),
	}
}
