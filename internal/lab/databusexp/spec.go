package databusexp

import (
	"fmt"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// Row keys and labels. Keys name rows for claims, targets and
// comparisons of runs; labels are how rows read.

func echoKey(n int) labresult.Key { return labresult.Key(fmt.Sprintf("echo/c%d", n)) }

func echoLabel(n int) string {
	if n == 1 {
		return "echo, 1 client"
	}
	return fmt.Sprintf("echo, %d clients", n)
}

// The echo server's scaling and the cost of its metrics (scaling.go).
const (
	echoBase      labresult.Key = "echo/c50/gomaxprocs-1"
	echoNoMetrics labresult.Key = "echo/c50/gomaxprocs-1/no-metrics"
	echoTwoProcs  labresult.Key = "echo/c50/gomaxprocs-2"
)

var (
	echoBaseLabel      = fmt.Sprintf("echo, %d clients: gateway 1 CPU, GOMAXPROCS=1, metrics on", scaleClients)
	echoNoMetricsLabel = fmt.Sprintf("echo, %d clients: gateway 1 CPU, GOMAXPROCS=1, metrics off", scaleClients)
	echoTwoProcsLabel  = fmt.Sprintf("echo, %d clients: gateway 2 CPUs, GOMAXPROCS=2, metrics on", scaleClients)
)

const (
	latencyOpt    = "latency-optimized"
	throughputOpt = "throughput-optimized"
)

func pubKey(kind string, agg bool) labresult.Key {
	return labresult.Key(fmt.Sprintf("publish/%s/aggregation-%s", kind, onOff(agg)))
}

func pubLabel(kind string, agg bool) string {
	if kind == throughputOpt {
		// The report's throughput-optimized client awaits each answer too.
		return fmt.Sprintf("publish: %d %s clients (batches of 100; ours: %d in flight), aggregation %s", pubClients, kind, pipelinedInflight, onOff(agg))
	}
	return fmt.Sprintf("publish: %d %s clients, aggregation %s", pubClients, kind, onOff(agg))
}

// The claims' small-batch rows run the report's checker loop, one
// request in flight per stream; ours pipeline 16 (the key the claims'
// rows had while they were pipelined).
func smallKey(agg bool) labresult.Key {
	return labresult.Key("publish/small-batch/inflight-1/aggregation-" + onOff(agg))
}

func smallLabel(agg bool) string {
	return fmt.Sprintf("publish: %d small-batch clients, 1 message per request, each answer awaited, aggregation %s", smallClients, onOff(agg))
}

func pipelinedKey(agg bool) labresult.Key {
	return labresult.Key("publish/small-batch/aggregation-" + onOff(agg))
}

func pipelinedLabel(agg bool) string {
	return fmt.Sprintf("ours: publish: %d small-batch clients, 1 message per request, %d in flight (pipelined), aggregation %s", smallClients, pipelinedInflight, onOff(agg))
}

// The publish cost (producer.go).
const (
	costGateway  labresult.Key = "publish-cost/gateway"
	costDirect   labresult.Key = "publish-cost/direct"
	costPerfTest labresult.Key = "publish-cost/perf-test"
)

var (
	costGatewayLabel = fmt.Sprintf("publish cost: gateway, %d throughput-optimized clients, aggregation off", pubClients)
	directLabel      = fmt.Sprintf("publish cost: direct franz-go producer, %d throughput-optimized clients (its own process, 1 CPU)", pubClients)
	perfLabel        = fmt.Sprintf("kafka-producer-perf-test (Kafka's own tool, 1 CPU): %d-byte records, acks=all", recordBytes)
)

// Subscribing (subscribe.go, consumer.go).
const (
	subscribeKey  labresult.Key = "subscribe/drain"
	fetchSmallKey labresult.Key = "subscribe-memory/fetch-32kib"
	fetchLargeKey labresult.Key = "subscribe-memory/fetch-50mb"
)

const subscribeLabel = "subscribe: 1 group x 4 members, draining a filled topic"

func delayKey(d time.Duration) labresult.Key {
	return labresult.Key(fmt.Sprintf("subscribe/drain/delay-%v", d))
}

func delayLabel(d time.Duration) string {
	return fmt.Sprintf("%s, %v processing per batch", subscribeLabel, d)
}

func fetchKey(bytes int32) labresult.Key {
	if bytes == fetchLarge {
		return fetchLargeKey
	}
	return fetchSmallKey
}

func fetchLabel(o lab.Options, bytes int32) string {
	size := "32 KiB (the gateway's default)"
	if bytes == fetchLarge {
		size = "50 MB (franz-go's default)"
	}
	return fmt.Sprintf("subscribe memory: %d groups x 1 member draining a filled topic, --fetch-max-bytes %s", fetchGroups(o), size)
}

// The ticker rows (ticker.go). A row at another interval than a
// second says so in its key.
func tickerKey(t tickerRow) labresult.Key {
	if t.interval == time.Second {
		return labresult.Key(fmt.Sprintf("ticker/c%d/aggregation-%s", t.conns, onOff(t.agg)))
	}
	return labresult.Key(fmt.Sprintf("ticker/c%d/every-%v/aggregation-%s", t.conns, t.interval, onOff(t.agg)))
}

func tickerLabel(t tickerRow) string {
	every := "1 message/s each"
	if t.interval != time.Second {
		every = fmt.Sprintf("1 message per %g s each", t.interval.Seconds())
	}
	return fmt.Sprintf("ticker: %s connections, %s, aggregation %s", thousands(t.conns), every, onOff(t.agg))
}

func idleTimeoutKey(d time.Duration) labresult.Key {
	if d == gateway.DefaultConnIdleTimeout {
		return "ticker/kafka-idle-timeout-default"
	}
	return labresult.Key(fmt.Sprintf("ticker/kafka-idle-timeout-%v", d))
}

func idleTimeoutLabel(d time.Duration) string {
	which := "franz-go's default"
	if d != gateway.DefaultConnIdleTimeout {
		which = "shorter than the interval"
	}
	return fmt.Sprintf("ticker: %d connections, 1 message per %v each, aggregation off, Kafka conn idle timeout %v (%s)", idleStreams, idleInterval, d, which)
}

// The fault rows (faults.go).
const (
	faultPublish   labresult.Key = "fault/gateway-kill-publish"
	faultSubscribe labresult.Key = "fault/gateway-kill-subscribe"
	faultMember    labresult.Key = "fault/member-reset"
	faultBroker    labresult.Key = "fault/broker-outage"
)

const (
	faultPublishLabel   = "fault: gateway SIGKILLed during publish"
	faultSubscribeLabel = "fault: gateway SIGKILLed during subscribe"
	faultMemberLabel    = "fault: member's connection reset holding unacked messages"
)

// The cluster fault rows (cluster.go).
const (
	faultLeaderPublish   labresult.Key = "fault/cluster/leader-kill-publish"
	faultLeaderSubscribe labresult.Key = "fault/cluster/leader-kill-subscribe"
	faultKillRestart     labresult.Key = "fault/cluster/kill-restart-x3"
	faultTwoDown         labresult.Key = "fault/cluster/two-of-three-down"
)

// clusterLabels are the cluster rows' labels, in their order.
var clusterLabels = []struct {
	key   labresult.Key
	label string
}{
	{faultLeaderPublish, "fault: 3-broker cluster, the partition leader's broker SIGKILLed during publish"},
	{faultLeaderSubscribe, "fault: 3-broker cluster, the partition leader's broker SIGKILLed during subscribe"},
	{faultKillRestart, "fault: 3-broker cluster, a broker SIGKILLed and restarted 3 times in a row during publish"},
	{faultTwoDown, fmt.Sprintf("fault: 3-broker cluster, 2 brokers SIGKILLed for %.0f s during publish (below min.insync.replicas)", twoDownFor.Seconds())},
}

// faultBrokerLabel names the outage by its length, so the two cannot drift.
var faultBrokerLabel = fmt.Sprintf("fault: Kafka broker down for %.0f s during publish", brokerOutage.Seconds())

// faultKeys are the fault rows every mode runs; they gate the claims.
var faultKeys = []labresult.Key{faultPublish, faultSubscribe, faultMember}

// brokerFault reports whether the broker-outage row runs with o: it
// takes the real broker the lab starts down, which takes a run of --full.
func brokerFault(o lab.Options) bool { return o.Mode == lab.Full && o.Kafka == lab.KafkaReal }

// runsPerfTest reports whether Kafka's own producer benchmark runs with
// o: against the real broker the lab starts.
func runsPerfTest(o lab.Options) bool { return o.Kafka == lab.KafkaReal }

// throughputJudged reports whether the publish throughput target is
// judged with o: through kfake, whose cost the bound allows for.
func throughputJudged(o lab.Options) bool { return o.Kafka == "" || o.Kafka == lab.KafkaFake }

// The idle streams (idle.go).
func idleKey(s idleShape) labresult.Key {
	return labresult.Key(fmt.Sprintf("idle/s%d/c%d", s.streams, s.conns))
}

func idleLabel(s idleShape) string {
	return fmt.Sprintf("idle: %s streams on %s connections", thousands(s.streams), thousands(s.conns))
}

// rows declares every row the experiment measures with o, in the order
// it measures them.
func rows(o lab.Options) []lab.RowSpec {
	var out []lab.RowSpec
	for _, n := range echoClients {
		out = append(out, lab.RefRow(echoKey(n), echoLabel(n), &labresult.Ref{RPS: labresult.F(echoRef[n])}))
	}
	out = append(out,
		lab.Row(echoBase, echoBaseLabel), lab.Row(echoFloor, echoFloorLabel), lab.Row(echoNoMetrics, echoNoMetricsLabel), lab.Row(echoTwoProcs, echoTwoProcsLabel),
		lab.Row(smallKey(false), smallLabel(false)), lab.Row(smallKey(true), smallLabel(true)),
		lab.Row(pubKey(latencyOpt, false), pubLabel(latencyOpt, false)), lab.Row(pubKey(latencyOpt, true), pubLabel(latencyOpt, true)),
		lab.Row(pipelinedKey(false), pipelinedLabel(false)), lab.Row(pipelinedKey(true), pipelinedLabel(true)),
	)
	out = append(out, costRows(o)...)
	out = append(out,
		lab.Row(pubKey(throughputOpt, false), pubLabel(throughputOpt, false)), lab.Row(pubKey(throughputOpt, true), pubLabel(throughputOpt, true)),
		lab.Row(subscribeKey, subscribeLabel),
		lab.Row(subscribeDirectKey, subscribeDirectLabel))
	for _, d := range processDelays {
		out = append(out, lab.Row(delayKey(d), delayLabel(d)))
	}
	for _, r := range compressionRows(o) {
		out = append(out, lab.Row(compressionKey(r), compressionLabel(r)))
	}
	for _, n := range topicsCounts {
		out = append(out, lab.Row(topicsKey(n), topicsLabel(n)))
	}
	for _, bytes := range []int32{fetchSmall, fetchLarge} {
		out = append(out, lab.Row(fetchKey(bytes), fetchLabel(o, bytes)))
	}
	for _, t := range tickerRows {
		out = append(out, lab.Row(tickerKey(t), tickerLabel(t)))
	}
	for _, d := range idleTimeouts {
		out = append(out, lab.Row(idleTimeoutKey(d), idleTimeoutLabel(d)))
	}
	out = append(out, replayRow(o))  // replay.go
	out = append(out, nackRows()...) // ours: consumers that nack (nacks.go)
	out = append(out,
		lab.Row(faultPublish, faultPublishLabel), lab.Row(faultSubscribe, faultSubscribeLabel), lab.Row(faultMember, faultMemberLabel))
	if brokerFault(o) {
		out = append(out, lab.Row(faultBroker, faultBrokerLabel))
	}
	if clusterFault(o) {
		for _, c := range clusterLabels {
			out = append(out, lab.Row(c.key, c.label))
		}
	}
	for _, s := range idleShapes {
		out = append(out, lab.Row(idleKey(s), idleLabel(s)))
		if floored(s) {
			out = append(out, lab.Row(idleFloorKey(s), idleFloorLabel(s)))
		}
	}
	return out
}

const noRatio = "no ratio given"

// claims are the report's two statements on aggregation, each a pair of
// claims, gated by the fault rows: a gateway that loses messages under a
// fault has not earned its speed.
func claims() []labresult.Claim {
	return []labresult.Claim{{
		Text:   fmt.Sprintf("aggregation raises publish throughput for many small-batch clients (%d clients, 1 message per request, each answer awaited: the report's checker loop)", smallClients),
		Ratio:  labresult.Ratio{Num: smallKey(true), Den: smallKey(false), Metric: labresult.RPS.Name},
		Bound:  labresult.AtLeast(1),
		Report: noRatio + "; nearly 5M rps written with it against the 3.5M target without",
		Gates:  faultKeys,
	}, {
		Text:   fmt.Sprintf("... and cuts the produce requests Kafka gets per message (%d small-batch clients)", smallClients),
		Ratio:  labresult.Ratio{Num: smallKey(true), Den: smallKey(false), Metric: kafkaProducePerMsg.Name},
		Bound:  labresult.AtMost(1),
		Report: noRatio + "; \"the load on Kafka fell sharply\"",
		Gates:  faultKeys,
	}, {
		Text:   fmt.Sprintf("aggregation raises the publish latency of latency-optimized producers (%d clients, 1 message per request, each answer awaited)", pubClients),
		Ratio:  labresult.Ratio{Num: pubKey(latencyOpt, true), Den: pubKey(latencyOpt, false), Metric: labresult.MeanMS.Name},
		Bound:  labresult.AtLeast(1),
		Report: noRatio,
		Gates:  faultKeys,
	}, {
		Text:   fmt.Sprintf("... and lowers their throughput (%d latency-optimized clients)", pubClients),
		Ratio:  labresult.Ratio{Num: pubKey(latencyOpt, true), Den: pubKey(latencyOpt, false), Metric: labresult.RPS.Name},
		Bound:  labresult.AtMost(1),
		Report: noRatio,
		Gates:  faultKeys,
	}}
}

// Our own bounds for the gateway at 1 CPU (bench/databus.sh holds them
// too).
const (
	targetEchoClients = 50 // the report's 300,808 msg/s row: 75k per core
	// targetEcho is round trips per second of gateway CPU: beyond the
	// report's 75k per core, and a figure a busy machine or a load
	// generator that cannot keep up does not bend, as rps at a quota
	// would.
	targetEcho       = 100000
	targetThroughput = 200000 // msgs/s, throughput-optimized, through kfake
	// The gateway spends at most this many times the CPU per message of
	// a producer that writes to Kafka itself.
	targetCostRatio = 1.2
)

// targets are our own bounds, and the ratios shown beside the rows.
func targets(o lab.Options) []labresult.Target {
	t := []labresult.Target{{
		Key:    "echo-per-gateway-cpu",
		Text:   fmt.Sprintf("echo: at least %s round trips per second of gateway CPU at %d clients (the report's %s msg/s on %d cores is %s per core)", thousands(targetEcho), targetEchoClients, thousands(int(echoRef[targetEchoClients])), reportCores, thousands(int(echoRef[targetEchoClients]/reportCores))),
		Row:    echoKey(targetEchoClients),
		Metric: roundTripsPerCPU.Name, Unit: roundTripsPerCPU.Unit,
		Bound: labresult.AtLeast(targetEcho),
	}}
	t = append(t, scalingRatios()...)
	t = append(t, floorTargets()...)
	t = append(t, pipelinedRatios()...)
	t = append(t, costTargets(o)...)
	t = append(t, subscribeCostTarget())
	t = append(t, compressionRatios(o)...)
	t = append(t, topicsRatio())
	t = append(t, replayTargets()...) // replay.go
	t = append(t, nackTargets()...)
	if clusterFault(o) {
		t = append(t, clusterTargets()...)
	}
	if throughputJudged(o) {
		t = append(t, labresult.Target{
			Key:    "publish-throughput",
			Text:   fmt.Sprintf("throughput-optimized publish: at least %s msgs/s at 1 CPU through kfake (%d clients, batches of 100, %d in flight, aggregation off)", thousands(targetThroughput), pubClients, pipelinedInflight),
			Row:    pubKey(throughputOpt, false),
			Metric: labresult.RPS.Name,
			Bound:  labresult.AtLeast(targetThroughput),
		})
	}
	return append(t, labresult.Target{
		Key:   "fetch-50mb-over-32kib-rss",
		Text:  "subscribe memory: the gateway's peak RSS with 50 MB fetch buffers over 32 KiB (the report: 50 MB fetch buffers blew memory at thousands of consumers, so it chose 32 KB)",
		Ratio: &labresult.Ratio{Num: fetchLargeKey, Den: fetchSmallKey, Metric: labresult.RSSMBMax.Name},
	})
}

// clusterTargets bound the cluster rows: a broker's crash, or two,
// costs time and refused writes, never an acknowledged message.
func clusterTargets() []labresult.Target {
	var t []labresult.Target
	for _, c := range clusterLabels {
		t = append(t, labresult.Target{
			Key:    labresult.Key("cluster-" + strings.TrimPrefix(string(c.key), "fault/cluster/") + "-lost"),
			Text:   fmt.Sprintf("%s: 0 acknowledged messages lost (replication 3 and acks=all: an acknowledged write is on two brokers at least)", strings.TrimPrefix(c.label, "fault: ")),
			Row:    c.key,
			Metric: labresult.Lost.Name,
			Bound:  labresult.AtMost(0),
		})
	}
	return t
}

// Spec declares the experiment with o.
func (*Experiment) Spec(o lab.Options) lab.Spec {
	return lab.Spec{
		Name:    "databus",
		Title:   "gRPC streaming gateway in front of Kafka: echo, GOMAXPROCS and metrics, publish with/without aggregation, compression, many topics, ticker, subscribe, fetch buffers, idle streams (report D)",
		Rows:    rows(o),
		Claims:  claims(),
		Targets: targets(o),
		Metrics: append(metrics(), nackMetrics()...),
		Figures: figures(o),
		Setup:   setup(o),
		Needs:   []string{lab.DepKafka},
		// The gateway and the checker take the Kafka's security.
		SecuredKafka: true,
	}
}
