package asyncexp

import "github.com/highload-lab/hlab/internal/lab"

// figures accounts for report A2's figures (shared/REFERENCE.md).
func figures(o lab.Options) []lab.Figure {
	bus := lab.Rerun("con: the bus is one more point of failure, which has to be maintained", "rows: "+faultBrokerLabel+"; "+faultEventLogLabel+" (the sync app's own point of failure: it has no broker)")
	if !brokerFault(o) {
		bus = lab.NotRerunFigure("con: the bus is one more point of failure, which has to be maintained (row: "+faultBrokerLabel+")", lab.ExternalReason+" (--kafka-brokers): it does not take them down; the sync app's row runs")
	}
	return []lab.Figure{
		lab.Rerun("sync, 1 connection: 56 rps (56.35), 28.20 ms mean, 90.45 ms max", "row: "+label(modeSync, 1)),
		lab.Rerun("sync, 3 connections: 28 rps (28.53), 105.07 ms mean, 204.37 ms max", "row: "+label(modeSync, 3)),
		lab.Rerun("async, 1 connection: 120 rps (120.80), 21.24 ms mean, 89.19 ms max", "row: "+label(modeKafkaAck, 1)),
		lab.Rerun("async, 3 connections: 87 rps (87.66), 40.31 ms mean, 103.10 ms max", "row: "+label(modeKafkaAck, 3)),
		lab.NotRerunFigure("wrk's latency stdev (29.85, 64.37, 26.03, 37.91 ms), Req/Sec per thread, requests per run (283, 144, 610, 441) and bytes read", "the rows give percentiles, not a standard deviation, and requests over the whole row; the report's table quotes Requests/sec and the mean"),
		lab.Rerun("async roughly doubles RPS (120/56 = 2.14 at 1 connection, 87/28 = 3.11 at 3)", "claims 1 and 3; claim 2 judges the handler that does not wait for Kafka"),
		lab.Rerun("async cuts latency", "the mean column of the four rows, beside the report's"),
		lab.Rerun("the write is synchronous: the handler answers after Kafka's leader acknowledged the event", "the Kafka-acked rows (franz-go, acks from all in-sync replicas: the leader)"),
		lab.Rerun("a separate consumer reads and does the log work", "the event log consumes beside the load; every event answered 200 must be consumed, or the claims are INVALID"),
		lab.NotRerunFigure("Confluent Kafka 7.0.1 with ZooKeeper, defaults", "kfake (embedded, labelled) by default; --kafka real runs a KRaft broker: ZooKeeper is gone from Kafka (setup: Kafka)"),
		lab.NotRerunFigure("pro: consumers can be added or removed as messages pile up in the queue", "one partition per topic, as the report's, allows one active consumer; the rows give its lag when the load stopped, but nothing scales on it"),
		lab.NotRerunFigure("con: only for heavy work that needs no immediate answer", "a caveat, not a measurement"),
		bus,
	}
}
