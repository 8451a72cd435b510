package databusexp

import (
	"fmt"
	"strings"

	"github.com/highload-lab/hlab/internal/lab"
)

// figures accounts for report D's figures (shared/REFERENCE.md).
func figures(o lab.Options) []lab.Figure {
	var figs []lab.Figure
	for _, n := range echoClients {
		figs = append(figs, lab.Rerun(fmt.Sprintf("echo server, 4 cores, %d client(s): %s messages in %.2f s, %s msg/s", n, thousands(n*echoMessagesPerClient), echoSeconds[n], thousands(int(echoRef[n]))), "row: "+echoLabel(n)+" (per core)"))
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
		lab.Rerun("aggregation made batching work better and cut the load on Kafka; with it, for small groups of clients, nearly 5M rps written",
			"claims 1 and 2 ("+smallLabel(false)+" / on: the report's checker loop, one request in flight per stream); ours, pipelined: rows "+pipelinedLabel(false)+" / on"),
		lab.Rerun("aggregation raised latency and lowered throughput for latency-optimized producers", "claims 3 and 4 (10 latency-optimized clients); rows: "+tickerLabel(tickerOff)+"; "+tickerLabel(tickerOn)),
		lab.Rerun("aggregation cut latency at 10k connections, a message per 30 s each: p99 ~300 ms before it, against ~35 ms for Kafka's own p99",
			"row: "+tickerLabel(tickerQuiet)+" (the report's interval; the p99 before aggregation in its note, as the row runs with it)"),
		lab.NotRerunFigure("ticker: 10,000 connections, 1 message per 30 s each, aggregation off (the report: p99 ~300 ms before aggregation)",
			"a producer per stream costs the gateway about 0.5-1 MB (franz-go's client): 1,000 held 560 MB, 2,100 held 2.5 GB with records timing out, so 10,000 do not fit its 2 GB at 1 CPU; the 1,000-connection rows compare aggregation off and on"),
		lab.NotRerunFigure("about 75% of the server's time spent waiting in system calls (its profile at 10k connections, before aggregation)",
			"the 10,000 streams without aggregation are not rerun (above), and the lab reads the gateway's CPU, not its split between user and kernel time; the gateway serves /debug/pprof for a profile of one's own"),
		lab.Rerun("compression working better with aggregation: \"батчинг и сжатие стали работать заметно лучше\" (batching and compression began to work noticeably better), after client aggregation; no figure given",
			compressionFigureRows(o)),
		lab.Rerun("checker scenarios: latency-optimized (one message, no delay), throughput-optimized (a batch of 100, no delay), ticker (one message per interval); each awaits its answer before the next",
			"the publish: and ticker: rows; the throughput-optimized rows and the pipelined small-batch rows are ours, 16 requests in flight"),
		lab.Rerun("one topic of 21 partitions capped writes near 1M rps; ten topics fixed it: \"невозможность записывать более 1 млн rps в один топик с 21 партицией. Эту проблему мы решили, просто создав десять топиков и немного подкрутив data-bus-checker, чтобы он умел в них писать\" (unable to write more than 1M rps to one topic of 21 partitions; solved by simply creating ten topics and tweaking data-bus-checker a little so it could write to them)",
			"rows: "+topicsLabel(1)+"; "+topicsLabel(topicsMany)+" (20 partitions in all, as 21 does not split in ten; the report's cap was its cluster's at 1M rps, about 30 times what one gateway at 1 CPU writes here, so the rows show what spreading costs or gains the gateway, not the cap)"),
		lab.NotRerunFigure("one of three gateway pods carried almost twice the traffic (about 20 against 10 Gbit/s) because it shared a node with its checker",
			"one machine: the checker always shares the gateway's machine and loopback, so there is no remote pair to set beside it"),
		lab.NotRerunFigure("the target: about 80,000 clients",
			"a fleet's figure: the lab's largest rows are 10,000 streams on one gateway, the report's per pod"),
		lab.NotRerunFigure("a metric of the time the server waits for clients' messages, which found the metadata waves (it tracked the clients' sleep)",
			"the gateway exports it (databus_client_wait_seconds; its tests show a client that sleeps before its first batch as that wait), but no row needs it: the gateway makes a stream's producer on its first batch, not when the stream opens (the waves' cause), and the waves need runs longer than franz-go's 5-minute metadata refresh"),
		lab.Rerun("consumers with configurable groups, batch sizes and delays", "row: "+subscribeLabel+"; rows: "+delayLabel(processDelays[0])+"; "+delayLabel(processDelays[1])),
		lab.NotRerunFigure("lesson: one gRPC client (one TCP connection) for many streams serializes them", "not rerun as throughput; the idle rows at 10,000 streams on 1,000 connections measure its memory side"),
		lab.NotRerunFigure("lesson: big per-connection buffers blow memory at 10k connections (32 KB chosen)", "the idle rows measure memory per stream with the gateway's 32 KiB buffers; gRPC's default buffers are not rerun beside them"),
		lab.Rerun("lesson: default fetch buffers (50 MB) blow memory (32 KB chosen)", "rows: "+fetchLabel(o, fetchSmall)+"; "+fetchLabel(o, fetchLarge)),
		lab.NotRerunFigure("lesson: clients started in sync refresh metadata in sync (p99 waves every 5 min)", "needs runs longer than franz-go's 5-minute metadata max age with clients started together; the lab's runs last seconds"),
		lab.Rerun("lesson: idle connection timeouts caused seconds-long spikes", "rows: "+idleTimeoutLabel(shortIdle)+"; the same at franz-go's default"),
		lab.Rerun("memory at 10k connections", "rows: "+idleLabel(idleShape{10000, 10000})+"; "+idleLabel(idleShape{10000, 1000})),
		lab.NotRerunFigure("the production cluster: 75 brokers, 30,000 partitions, up to 5M rps; 1.5M rps produce and 2M fetch, 24 and 56 Gbit/s, 50,000 producers, 16,000 consumers (11,000 with a partition), about 400,000 connections; the full-size test's target of 3.5M rps, ~100k rps per pod, 48 pods (1.5 times the need), 10k connections per pod, nearly 5M rps with aggregation",
			"a fleet, not a machine: the lab measures one gateway at 1 CPU, per core"),
		lab.NotRerunFigure("built in about two person-months", "a project's figure, not a measurement"),
	)
}

// compressionFigureRows says which rows rerun the compression figure
// with o.
func compressionFigureRows(o lab.Options) string {
	what := "the compression table: bytes to Kafka and gateway CPU per message, aggregation off and on, per codec"
	if o.Mode != lab.Full {
		what += fmt.Sprintf(" (%s on compressible values; every codec, and incompressible values, in --full)", strings.Join(compressionQuickCodecs, " and "))
	}
	return what + "; the ratios compression-aggregation-<codec>"
}
