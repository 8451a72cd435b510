package databusexp

// The experiment's setup beside the report's, item by item. The report
// gives few settings: where it gives none, its item says what it does
// say, and ours why we chose what runs. The first claim's rows record
// what they really run with (bench.firstClaimSetup, bench.startKafka),
// so these declarations cannot drift from the code.

import (
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// Items the first claim's rows record (Run.UsedInFirstClaim).
const (
	setupInflight  = "checker: requests in flight per stream (send a PublishRequest, await its PublishResponse, repeat)"
	setupBatch     = "checker: messages per request"
	setupClients   = "publishing clients"
	setupMessage   = "message size"
	setupTopic     = "topics and partitions"
	setupDurations = "durations"
	setupGateway   = "gateway instance"
	setupLinger    = "producer linger"
)

// The shared producer's linger: how long aggregated streams wait for
// each other's messages.
const aggregationLinger = 5 * time.Millisecond

func clientsSetup(streams, conns int) string {
	per := "a gRPC connection each"
	if conns > 0 {
		per = fmt.Sprintf("on %d gRPC connections", conns)
	}
	return fmt.Sprintf("%d streams, %s, on one gateway", streams, per)
}

func messageSetup(bytes int) string {
	return fmt.Sprintf("%d-byte values (zeros) and a 28-byte header (the checker's run, stream, sequence and send time)", bytes)
}

func topicSetup(partitions int) string {
	return fmt.Sprintf("a fresh topic of %d partitions per run", partitions)
}

// durationsSetup is the claims' rows' timing with o, their runs
// lasting run.
func durationsSetup(o lab.Options, run time.Duration) string {
	minRun, minReqs := o.MinRun()
	warm := fmt.Sprintf("a %v warm-up", o.Warmup())
	if o.Kafka == lab.KafkaReal || o.ExternalFor(lab.DepKafka) {
		warm = "a warm-up until throughput stops climbing (the broker's JVM)"
	}
	return fmt.Sprintf("runs of %v (longer where %s requests need it) after %s, in %d to %d rounds alternating the rows' order",
		max(run, minRun), thousands(int(minReqs)), warm, lab.DefaultMinRounds, lab.DefaultMaxRounds)
}

func gatewaySetup(cpu float64, memMB int) string {
	return fmt.Sprintf("one gateway process at %g CPU (a cgroup quota) and %d MB", cpu, memMB)
}

func lingerSetup(shared time.Duration) string {
	return fmt.Sprintf("0 for a stream's own producer; %v for the shared (aggregated) one", shared)
}

// kafkaSetup is the Kafka o runs against.
func kafkaSetup(o lab.Options) string {
	switch {
	case o.ExternalFor(lab.DepKafka):
		return "the brokers --kafka-brokers names"
	case o.Kafka == lab.KafkaReal:
		return "one Apache Kafka KRaft node (broker and controller) on this machine, unconstrained"
	default:
		return "kfake, franz-go's in-memory fake cluster, a process of its own on this machine, unconstrained"
	}
}

// setup sets the experiment's setup with o beside the report's.
func setup(o lab.Options) []labresult.Setup {
	return []labresult.Setup{{
		Item:       "Kafka",
		Report:     "a cluster: 21 brokers in the full-size test (its figures' captions: one partition per broker for a topic of 21); the largest production cluster has 75 brokers and 30,000 partitions",
		Ours:       kafkaSetup(o),
		Why:        "one machine: kfake is the embedded default, so the lab runs anywhere, and --kafka real runs a real broker; the figures are one gateway's at 1 CPU, compared per core, not a cluster's",
		FirstClaim: true,
	}, {
		Item:       setupTopic,
		Report:     "one topic of 21 partitions, which capped writes near 1M rps; then ten topics (10 partitions per broker)",
		Ours:       topicSetup(partitions),
		Why:        "one gateway at 1 CPU writes tens of thousands of messages/s, far from the 1M rps a topic of 21 partitions capped; 10 partitions spread the per-stream producers' writes as a cluster's partitions do",
		FirstClaim: true,
	}, {
		Item:       "producer acks",
		Report:     "durable writes: the server writes to Kafka synchronously, then answers (no acks setting given)",
		Ours:       "acks=all, idempotent (franz-go's defaults); the answer after Kafka's ack",
		Why:        "the report names no setting; acks=all is what a durable write takes",
		FirstClaim: true,
	}, {
		Item:       "producer compression",
		Report:     "on: with aggregation batching and compression \"worked noticeably better\" (codec not given)",
		Ours:       "snappy, franz-go's default (the gateway sets none of its own)",
		Why:        "the report names no codec",
		FirstClaim: true,
	}, {
		Item:       setupLinger,
		Report:     "ProducerLinger made smaller, since producers were not shared between connections (value not given)",
		Ours:       lingerSetup(aggregationLinger),
		Why:        "the report gives no value: a stream's own producer sends at once, the shared one waits a little to fill batches from many streams",
		FirstClaim: true,
	}, {
		Item:       "Kafka connection idle timeout",
		Report:     "ConnIdleTimeout raised above franz-go's default (value not given)",
		Ours:       fmt.Sprintf("%v, franz-go's default", gateway.DefaultConnIdleTimeout),
		Why:        "the report gives no value; the claims' streams publish without pause, so no Kafka connection idles in their rows; the idle-timeout rows measure the lesson",
		FirstClaim: true,
	}, {
		Item:       "Kafka producer per stream",
		Report:     "a Kafka producer per connection without aggregation; made as the connection opened, which put thousands in step refreshing metadata, then fixed (the report does not say how)",
		Ours:       "a Kafka producer per stream without aggregation, made on its first batch",
		Why:        "our reading of the fix: made on a stream's first message, a producer refreshes metadata on its own clock",
		FirstClaim: true,
	}, {
		Item:       "aggregation",
		Report:     "with_clients_aggregation, the client's choice; the full-size test turned it on for small groups of clients",
		Ours:       "x-databus-aggregation, the client's choice: every aggregated stream of a gateway shares its one producer",
		Why:        "the report does not say how it grouped clients; one gateway has one producer to share",
		FirstClaim: true,
	}, {
		Item:       "gRPC transport",
		Report:     "bidirectional streams; settings sent once in the stream's metadata; a gRPC client (TCP connection) per client; 32 KB buffers",
		Ours:       "bidirectional streams; settings sent once in the stream's metadata; a gRPC client (TCP connection) per client; 32 KB buffers",
		FirstClaim: true,
	}, {
		Item:       "metrics",
		Report:     "on",
		Ours:       "on",
		FirstClaim: true,
	}, {
		Item:       setupInflight,
		Report:     "1",
		Ours:       "1",
		FirstClaim: true,
	}, {
		Item:       setupBatch,
		Report:     "1 (latency-optimized) or 100 (throughput-optimized); the full-size test's profile is not given",
		Ours:       "1",
		Why:        "the report gives its scenarios, not the profile of its aggregated run; one message per request is where aggregation has the most to batch",
		FirstClaim: true,
	}, {
		Item:       setupClients,
		Report:     "the full-size test: 48 gateway pods, up to 10,000 connections each, a checker profile \"more or less\" like production",
		Ours:       clientsSetup(smallClients, 0),
		Why:        "one machine of 2 cores: 200 streams keep one gateway at 1 CPU busy while the checker has the other core",
		FirstClaim: true,
	}, {
		Item:       setupMessage,
		Report:     "not given",
		Ours:       messageSetup(recordBytes),
		Why:        "the report gives no size; the lab's values are zeros, which a codec shrinks to almost nothing",
		FirstClaim: true,
	}, {
		Item:       setupGateway,
		Report:     "a pod of data-bus in Kubernetes, resources not given (the echo stand had 4 cores; about 100,000 rps a pod)",
		Ours:       gatewaySetup(gatewayCPU, gatewayMemMB),
		Why:        "one machine of 2 cores: one core for the gateway, compared per core, the other for the checker",
		FirstClaim: true,
	}, {
		Item:       "checker placement",
		Report:     "data-bus-checker in pods of its own; the one pod on its gateway's node carried about twice the traffic",
		Ours:       "in the lab's process on the gateway's machine, not pinned to a core, over loopback",
		Why:        "one machine: the checker is always next to the gateway, as the report's fastest pod was",
		FirstClaim: true,
	}, {
		Item:       setupDurations,
		Report:     "not given (graphs over minutes)",
		Ours:       durationsSetup(o, timings(o).pubRun),
		Why:        "the report gives none; rounds in alternating order give each claim's ratio an interval",
		FirstClaim: true,
	}, {
		Item:       "delivery check",
		Report:     "not described for the producer tests",
		Ours:       "a consumer group reads every acked message; for the small-batch rows once publishing ended, outside the measured window",
		Why:        "the lab's gate: a gateway that loses messages has not earned its speed",
		FirstClaim: true,
	}, {
		Item:   "echo test",
		Report: "two services on bare gRPC, the server one instance on 4 cores; each client sent 100,000 messages, one at a time, each answer awaited",
		Ours:   fmt.Sprintf("the gateway with --echo at %g CPU; each client sends one message at a time, each answer awaited, for %v after a %v warm-up", gatewayCPU, timings(o).echoRun, o.Warmup()),
		Why:    "one machine of 2 cores: compared per core; a window rather than a count, so that every row runs as long",
	}, {
		Item:   "throughput-optimized client",
		Report: "batches of 100 messages, no delay, each answer awaited",
		Ours:   fmt.Sprintf("batches of 100 messages, no delay, %d in flight", pipelinedInflight),
		Why:    "ours: the rows of the throughput target and the publish cost, which carry no claim; pipelined, their bound is the gateway, not the client's round trip",
	}, {
		Item:   "ticker at 1,000 connections",
		Report: "1 message per second per connection, after a random delay",
		Ours:   tickerSetup(tickerInterval),
	}, {
		Item:   "ticker at 10,000 connections",
		Report: "1 message per 30 s per connection, after a random delay",
		Ours:   tickerSetup(quietInterval),
	}}
}

// tickerSetup is a ticker's load at interval per connection.
func tickerSetup(interval time.Duration) string {
	every := "second"
	if interval != time.Second {
		every = fmt.Sprintf("%g s", interval.Seconds())
	}
	return fmt.Sprintf("1 message per %s per connection, after a random delay", every)
}
