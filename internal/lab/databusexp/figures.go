package databusexp

import (
	"fmt"

	"github.com/highload-lab/hlab/internal/lab"
)

// figures accounts for report D's figures (shared/REFERENCE.md).
func figures(o lab.Options) []lab.Figure {
	var figs []lab.Figure
	for _, n := range echoClients {
		figs = append(figs, lab.Rerun(fmt.Sprintf("echo server, 4 cores, %d client(s): %.0f msg/s", n, echoRef[n]), "row: "+echoLabel(n)+" (per core)"))
	}
	perf := lab.Rerun("the gateway's publish cost beside Kafka's own producer (beyond the report)", "row: "+perfLabel)
	broker := lab.Rerun("durable writes through a broker outage (beyond the report)", "row: "+faultBrokerLabel)
	switch {
	case o.ExternalFor(lab.DepKafka):
		perf = lab.NotRerunFigure(perf.Figure, "the perf test runs against the broker the lab starts (--kafka real), not external brokers")
		broker = lab.NotRerunFigure(broker.Figure, lab.ExternalReason+" (--kafka-brokers): it does not take a broker down")
	case o.Kafka != lab.KafkaReal:
		perf = lab.NotRerunFigure(perf.Figure, "kfake has no perf test: run with --kafka real")
		broker = lab.NotRerunFigure(broker.Figure, "needs --full and the real broker (--kafka real): kfake keeps its records in its own process, so it cannot go down and come back")
	case o.Mode != lab.Full:
		broker = lab.NotRerunFigure(broker.Figure, "rerun in --full")
	}
	return append(figs,
		lab.Rerun("the echo server scales almost linearly with GOMAXPROCS", "rows: "+echoBaseLabel+"; "+echoTwoProcsLabel+" (the checker shares the 2 cores)"),
		lab.Rerun("metrics cost ~17% of the echo server's throughput", "rows: "+echoBaseLabel+"; "+echoNoMetricsLabel),
		lab.Rerun("gRPC bidirectional streams; connection settings sent once in metadata when a stream opens", "every row: the gateway is built so"),
		lab.Rerun("publish: the server writes synchronously to Kafka and then acks; durable writes", "the publish rows, every acked message verified by a consumer group; row: "+faultPublishLabel),
		perf,
		broker,
		lab.Rerun("subscribe: at-least-once, nothing committed without the client's ack (commit-on-disconnect lost messages)", "row: "+subscribeLabel+"; rows: "+faultSubscribeLabel+"; "+faultMemberLabel),
		lab.Rerun("aggregation made batching work better and cut the load on Kafka", "claims 1 and 2 ("+smallLabel(false)+" / on)"),
		lab.Rerun("aggregation raised latency and lowered throughput for latency-optimized producers", "claims 3 and 4 (10 latency-optimized clients); rows: "+tickerLabel(1000, false)+"; "+tickerLabel(1000, true)),
		lab.Rerun("aggregation cut latency at 10k connections: p99 ~300 ms before it, against ~35 ms for Kafka's own p99", "row: "+tickerLabel(10000, true)),
		lab.NotRerunFigure(tickerLabel(10000, false)+" (the report: p99 ~300 ms before aggregation)",
			"a producer per stream costs the gateway about 0.5-1 MB (franz-go's client): 1,000 held 560 MB, 2,100 held 2.5 GB with records timing out, so 10,000 do not fit its 2 GB at 1 CPU; the 1,000-connection rows compare aggregation off and on"),
		lab.NotRerunFigure("compression working better with aggregation", "not measured: the gateway's producers do not compress"),
		lab.Rerun("checker scenarios: latency-optimized, throughput-optimized, ticker", "the publish: and ticker: rows"),
		lab.Rerun("consumers with configurable groups, batch sizes and delays", "row: "+subscribeLabel+"; rows: "+delayLabel(processDelays[0])+"; "+delayLabel(processDelays[1])),
		lab.NotRerunFigure("lesson: one gRPC client (one TCP connection) for many streams serializes them", "not rerun as throughput; the idle rows at 10,000 streams on 1,000 connections measure its memory side"),
		lab.NotRerunFigure("lesson: big per-connection buffers blow memory at 10k connections (32 KB chosen)", "the idle rows measure memory per stream with the gateway's 32 KiB buffers; gRPC's default buffers are not rerun beside them"),
		lab.Rerun("lesson: default fetch buffers (50 MB) blow memory (32 KB chosen)", "rows: "+fetchLabel(o, fetchSmall)+"; "+fetchLabel(o, fetchLarge)),
		lab.NotRerunFigure("lesson: clients started in sync refresh metadata in sync (p99 waves every 5 min)", "needs runs longer than franz-go's 5-minute metadata max age with clients started together; the lab's runs last seconds"),
		lab.Rerun("lesson: idle connection timeouts caused seconds-long spikes", "rows: "+idleTimeoutLabel(shortIdle)+"; the same at franz-go's default"),
		lab.Rerun("memory at 10k connections", "rows: "+idleLabel(idleShape{10000, 10000})+"; "+idleLabel(idleShape{10000, 1000})),
		lab.NotRerunFigure("the production cluster: 75 brokers, 30,000 partitions, 1.5M rps produce and 2M fetch, 24 and 56 Gbit/s, 50,000 producers, 16,000 consumers; ~100k rps per pod, 48 pods, 10k connections per pod, ~5M rps with aggregation",
			"a fleet, not a machine: the lab measures one gateway at 1 CPU, per core"),
	)
}
