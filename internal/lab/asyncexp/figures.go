package asyncexp

import "github.com/highload-lab/hlab/internal/lab"

// figures accounts for report A2's figures (shared/REFERENCE.md).
func figures() []lab.Figure {
	return []lab.Figure{
		lab.Rerun("sync, 1 connection: 56 rps, 28.20 ms mean", "row: sync, 1 connection"),
		lab.Rerun("sync, 3 connections: 28 rps, 105.07 ms mean", "row: sync, 3 connections"),
		lab.Rerun("async, 1 connection: 120 rps, 21.24 ms mean", "row: async, answered once Kafka acked (the report's), 1 connection"),
		lab.Rerun("async, 3 connections: 87 rps, 40.31 ms mean", "row: async, answered once Kafka acked (the report's), 3 connections"),
		lab.Rerun("async roughly doubles RPS (120/56 = 2.14 at 1 connection, 87/28 = 3.11 at 3)", "claims 1 and 3; claim 2 judges the handler that does not wait for Kafka"),
		lab.Rerun("async cuts latency", "the mean column of the four rows, beside the report's"),
		lab.Rerun("the write is synchronous: the handler answers after Kafka's leader acknowledged the event", "the Kafka-acked rows (franz-go, acks from the leader)"),
		lab.Rerun("a separate consumer reads and does the log work", "the event log consumes beside the load; every event answered 200 must be consumed, or the claims are INVALID"),
		lab.NotRerunFigure("Confluent Kafka 7.0.1 with ZooKeeper, defaults", "kfake (embedded, labelled) by default; --kafka real runs a KRaft broker: ZooKeeper is gone from Kafka"),
		lab.NotRerunFigure("only for work that needs no immediate answer", "a caveat, not a measurement"),
		lab.NotRerunFigure("the bus is one more thing to run", "a caveat: report D's experiment (databus) measures a bus's own cost and faults"),
	}
}
