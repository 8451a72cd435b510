package scaleexp

import "github.com/highload-lab/hlab/internal/lab"

// figures accounts for report A1's figures (shared/REFERENCE.md).
func figures() []lab.Figure {
	return []lab.Figure{
		lab.Rerun("one instance, 1 thread 1 connection: 169 rps, 22.55 ms mean", "row: one instance, 1 connection"),
		lab.Rerun("one instance, 3 threads 3 connections: 74 rps, 45.85 ms mean", "row: one instance, 3 connections"),
		lab.Rerun("three instances + LB, 1 connection: 450 rps, 9.09 ms mean", "row: three instances + LB, 1 connection"),
		lab.Rerun("three instances + LB, 3 connections: 325 rps, 22.41 ms mean", "row: three instances + LB, 3 connections"),
		lab.Rerun("replicas multiply throughput (450/169 = 2.66 at 1 connection, 325/74 = 4.39 at 3)", "claims 1 and 2"),
		lab.Rerun("replicas cut latency", "the mean column of the four rows, beside the report's"),
		lab.Rerun("each figure an average over dozens of runs", "the claims' rows run in alternating rounds until the verdict's interval is decided"),
		lab.NotRerunFigure("only for stateless services", "a caveat, not a measurement: the service keeps no state"),
		lab.NotRerunFigure("the load balancer becomes the single point of failure", "a caveat: the lab does not kill the balancer"),
	}
}
