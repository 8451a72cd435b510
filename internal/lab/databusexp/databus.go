// Package databusexp is report D's experiment: the databus gateway (hlab
// serve databus: gRPC streams in front of Kafka) at 1 CPU, driven by the
// databus checker (internal/checker, through Checker) from the lab's
// process.
//
// Rows: the report's echo table (1 to 100 clients, one message per
// request, each answer awaited; the report's instance had 4 cores, ours
// 1 CPU, so the comparison is per core); the echo server's scaling and
// the cost of its metrics (scaling.go: 50 clients at 1 CPU and
// GOMAXPROCS=1 with metrics, the same with --metrics=false, and at 2
// CPUs and GOMAXPROCS=2, in alternating rounds); publish throughput and
// latency of latency-optimized (one message per request) and
// throughput-optimized (batches of 100, pipelined) clients with and
// without aggregation; many small-batch clients with and without
// aggregation; the publish cost (producer.go): the gateway's CPU per
// message against a franz-go producer writing straight to Kafka from a
// process of its own at 1 CPU (databus-checker --direct), in alternating
// rounds, and with --kafka real against Kafka's own
// kafka-producer-perf-test at 1 CPU; subscribe get-ack cycles per second
// and per gateway CPU-second over drains of a filled topic alone
// (subscribe.go), and with members that process each batch for 1 and
// 10 ms (consumer.go); the gateway's RSS while many groups drain a
// filled topic at --fetch-max-bytes 32 KiB and 50 MB (consumer.go: the
// report's fetch-buffer lesson); ticker publish latency (ticker.go: one
// message a second on each of 1,000 connections with and without
// aggregation, 10,000 with it) and the idle-connection-timeout lesson
// (franz-go's ConnIdleTimeout shorter than the interval between a
// stream's messages, against its default); faults (faults.go: the
// gateway SIGKILLed during publish and during subscribe, a member's
// connection reset with messages unacked, in --full with the real
// broker Kafka down for 10 s), each counting lost messages; and the
// gateway's memory per idle stream at 1,000 and 10,000 streams.
//
// The claims are the report's two statements on aggregation (streams
// sharing the gateway's producers): with many small-batch clients it
// raises throughput and cuts the produce requests Kafka gets; for
// latency-optimized producers it raises latency and lowers throughput.
// Their four rows run in rounds, their order alternating, each run
// verified: every message the gateway acked must reach a consumer group,
// or the row's claims are INVALID; so must every message of the fault
// rows.
//
// Kafka is kfake, franz-go's in-memory fake, run as a process of its own
// (hlab serve kfake) so that it neither shares the checker's heap and
// garbage collector nor hides in its CPU figures; --kafka real runs a
// single-node KRaft broker instead.
package databusexp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// The gateway's quota: one CPU (the report's instance had 4 cores), and
// memory enough for 10,000 streams.
const (
	gatewayCPU   = 1.0
	gatewayMemMB = 2048
	partitions   = 10
)

// The report's echo table: clients -> messages/s, 4 cores.
var (
	echoClients = []int{1, 2, 5, 10, 20, 50, 100}
	echoRef     = map[int]float64{1: 28373, 2: 54989, 5: 105607, 10: 160678, 20: 232907, 50: 300808, 100: 339664}
)

const reportCores = 4

// The targets for the gateway at 1 CPU (bench/databus.sh holds
// them too).
const (
	targetEchoClients = 50 // the report's 300,808 msg/s row: 75k per core
	// targetEcho is round trips per second of gateway CPU (issue 15):
	// beyond the report's 75k per core, and a figure a busy machine or a
	// load generator that cannot keep up does not bend, as rps at a quota
	// would.
	targetEcho       = 100000
	targetThroughput = 200000 // msgs/s, throughput-optimized, through kfake
	// RSS per idle stream at 10,000 streams: 10 streams per connection,
	// and a connection each.
	targetIdleSharedKB = 12
	targetIdleOwnKB    = 20
)

// Publishing clients.
const (
	pubClients   = 10  // latency- and throughput-optimized rows
	smallClients = 200 // the claim's many small-batch clients
)

// Row labels; the claims refer to them.
func echoLabel(n int) string {
	if n == 1 {
		return "echo, 1 client"
	}
	return fmt.Sprintf("echo, %d clients", n)
}

func pubLabel(kind string, agg bool) string {
	return fmt.Sprintf("publish: %d %s clients, aggregation %s", pubClients, kind, onOff(agg))
}

func smallLabel(agg bool) string {
	return fmt.Sprintf("publish: %d small-batch clients, aggregation %s", smallClients, onOff(agg))
}

func idleLabel(streams, conns int) string {
	return fmt.Sprintf("idle: %s streams on %s connections", thousands(streams), thousands(conns))
}

const (
	latencyOpt    = "latency-optimized"
	throughputOpt = "throughput-optimized"
)

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Experiment is report D's databus experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

func (*Experiment) Name() string { return "databus" }

func (*Experiment) Title() string {
	return "gRPC streaming gateway in front of Kafka: echo, GOMAXPROCS and metrics, publish with/without aggregation, ticker, subscribe, fetch buffers, idle streams (report D)"
}

const noRatio = "no ratio given"

func (*Experiment) Claims() []lab.Claim {
	return []lab.Claim{{
		Text:      fmt.Sprintf("aggregation raises publish throughput for many small-batch clients (%d clients, 1 message per request, 16 in flight)", smallClients),
		Metric:    "rps",
		Numerator: smallLabel(true), Denominator: smallLabel(false),
		AtLeast: 1,
		Report:  noRatio + "; nearly 5M rps written with it against the 3.5M target without",
		Gates:   faultLabels,
	}, {
		Text:      fmt.Sprintf("... and cuts the produce requests Kafka gets per message (%d small-batch clients)", smallClients),
		Metric:    "kafka_produce_requests_per_msg",
		Numerator: smallLabel(true), Denominator: smallLabel(false),
		AtMost: 1,
		Report: noRatio + "; \"the load on Kafka fell sharply\"",
		Gates:  faultLabels,
	}, {
		Text:      fmt.Sprintf("aggregation raises the publish latency of latency-optimized producers (%d clients, 1 message per request, each answer awaited)", pubClients),
		Metric:    "mean_ms",
		Numerator: pubLabel(latencyOpt, true), Denominator: pubLabel(latencyOpt, false),
		AtLeast: 1,
		Report:  noRatio,
		Gates:   faultLabels,
	}, {
		Text:      fmt.Sprintf("... and lowers their throughput (%d latency-optimized clients)", pubClients),
		Metric:    "rps",
		Numerator: pubLabel(latencyOpt, true), Denominator: pubLabel(latencyOpt, false),
		AtMost: 1,
		Report: noRatio,
		Gates:  faultLabels,
	}}
}

// timing is how long the parts of a mode take.
type timing struct {
	echoRun, pubRun time.Duration
	settle          time.Duration // idle streams before reading RSS
	// tickerRun is a ticker row's window; idleRun the idle-timeout
	// pair's, long enough for a few messages per stream.
	tickerRun, idleRun time.Duration
}

func timings(o lab.Options) timing {
	if o.Mode == lab.Full {
		// The report's echo runs took 3.5-29 s (100,000 messages per client).
		return timing{echoRun: 10 * time.Second, pubRun: 20 * time.Second, settle: 5 * time.Second,
			tickerRun: 30 * time.Second, idleRun: 20 * time.Second}
	}
	return timing{echoRun: 5 * time.Second, pubRun: 5 * time.Second, settle: 2 * time.Second,
		tickerRun: 5 * time.Second, idleRun: 8 * time.Second}
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	t := timings(o)
	r := time.Duration(o.Repeats())
	run := func(d time.Duration) time.Duration { return o.Warmup() + r*d + 2*time.Second }
	echo := time.Duration(len(echoClients)) * run(t.echoRun)
	pairs := lab.DefaultMinRounds * 4 * (t.pubRun + 4*time.Second) // each run verified
	others := 2*run(t.pubRun) + 5*time.Second
	idle := 3*t.settle + 25*time.Second       // opening 21,000 streams
	faults := 3 * (t.pubRun + 15*time.Second) // a kill costs a 6 s session
	if o.Mode == lab.Full && o.Kafka == lab.KafkaReal {
		faults += 90 * time.Second
	}
	start := 4 * time.Second // gateways and Kafka
	if o.Kafka == lab.KafkaReal {
		start += 10 * time.Second
	}
	lessons := scalingEstimate(o, t) + tickerEstimate(o, t) + consumerEstimate(o, t)
	return echo + pairs + others + subscribeEstimate(t) + faults + idle + start + costEstimate(o, t.pubRun) + lessons
}

// Dependencies: Kafka (hlab lab --kafka-brokers).
func (*Experiment) Dependencies() []string { return []string{lab.DepKafka} }

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	t := timings(run.Opts)
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("gateway", fmt.Sprintf("hlab serve databus, %.0f CPU, %d MB (GOMAXPROCS Go's default, which rounds a quota below 2 CPUs up to 2, unless a row says otherwise); the report's instance had %d cores", gatewayCPU, gatewayMemMB, reportCores))
	run.SetEnv("checker", "internal/checker in the lab's process, unconstrained; one gRPC connection per stream unless a row says otherwise; 100-byte values")
	run.SetEnv("method", "the claims' four rows run in rounds, their order alternating, every run verified by a consumer group; other rows one run each (--repeat N for more)")
	run.Note("clients: echo and latency-optimized send 1 message per request and await each answer; throughput-optimized send batches of 100, 16 in flight; small-batch send 1 message per request, 16 in flight; values are 100 bytes; rps = messages acked per second, latencies are per request (sent to answered)")

	measure := func(g *lab.Gateway, label string, cfg checker.Config, d time.Duration) lab.Measurement {
		cfg.Target = g.GRPC
		return lab.Measurement{Label: label, Procs: []*sandbox.Process{g.Proc}, Duration: d,
			Driver: Checker{Config: cfg, Metrics: g.URL("/metrics")}}
	}

	// Echo: the transport alone, no Kafka.
	gw, err := run.StartGateway(ctx, gatewayCPU, gatewayMemMB, gateway.Options{Config: gateway.Config{Echo: true}})
	if err != nil {
		return err
	}
	echoRows := map[int]*lab.Row{}
	for _, n := range echoClients {
		m := measure(gw, echoLabel(n), checker.Config{Scenario: checker.Echo, Streams: n}, t.echoRun)
		m.Ref = &lab.Ref{RPS: lab.F(echoRef[n])}
		row, err := run.Measure(ctx, m)
		if err != nil {
			gw.Stop()
			return err
		}
		perCore := echoRef[n] / reportCores
		row.Note = joinNote(row.Note, fmt.Sprintf("per core: report %s msg/s (4 cores), ours %s at 1 CPU: %.2fx", thousands(int(perCore)), thousands(int(*row.RPS)), *row.RPS/perCore))
		row.Note = joinNote(row.Note, echoCPUNote(row))
		run.AddRow(row)
		echoRows[n] = row
	}
	gw.Stop()
	if err := e.echoScaling(ctx, run, t); err != nil {
		return err
	}

	// Publishing through Kafka.
	k, err := run.StartKafka(ctx, partitions)
	if err != nil {
		return err
	}
	defer k.Stop()
	run.SetEnv("kafka", k.Kind)
	gw, err = run.StartGateway(ctx, gatewayCPU, gatewayMemMB, onKafka(k))
	if err != nil {
		return err
	}
	defer gw.Stop()
	topicSeq := 0
	topic := func() string {
		topicSeq++
		return k.Topic(fmt.Sprintf("lab-databus-%d-%d", time.Now().Unix(), topicSeq))
	}
	var topics []string
	defer func() {
		for _, tp := range topics { // kfake keeps every record in memory
			k.DeleteTopic(context.WithoutCancel(ctx), tp)
		}
	}()
	publish := func(label string, cfg checker.Config) lab.Measurement {
		cfg.Topic, cfg.Brokers, cfg.Partitions = topic(), k.Brokers, partitions
		topics = append(topics, cfg.Topic)
		m := measure(gw, label, cfg, t.pubRun)
		m.Steady = k.JVM
		return m
	}
	var claimMs []lab.Measurement
	for _, agg := range []bool{false, true} {
		// Verified by a group that reads once publishing ended, so that it
		// does not compete with the publishers.
		claimMs = append(claimMs, publish(smallLabel(agg), checker.Config{
			Scenario: checker.Throughput, Streams: smallClients, Batch: 1, Inflight: 16, Aggregation: agg,
			Groups: 1, Members: 4, Consume: checker.After, SubBatch: 100,
		}))
	}
	for _, agg := range []bool{false, true} {
		// Consumers beside the publishers: end-to-end latency, verified.
		claimMs = append(claimMs, publish(pubLabel(latencyOpt, agg), checker.Config{
			Scenario: checker.Latency, Streams: pubClients, Aggregation: agg, Groups: 1, Members: 2,
		}))
	}
	claimRows, err := run.MeasurePaired(ctx, lab.Paired{Measurements: claimMs})
	if err != nil {
		return err
	}
	for _, row := range claimRows {
		row.Note = joinNote(row.Note, publishNote(row))
		run.AddRow(row)
	}
	newTopic := func() string { tp := topic(); topics = append(topics, tp); return tp }
	if err := publishCost(ctx, run, k, publish, newTopic, t.pubRun); err != nil {
		return err
	}
	var thrOff *lab.Row
	for _, agg := range []bool{false, true} {
		cfg := checker.Config{Scenario: checker.Throughput, Streams: pubClients, Aggregation: agg}
		if !agg {
			// Verified by consumers that start once publishing ended.
			cfg.Groups, cfg.Members, cfg.Consume, cfg.SubBatch = 1, 4, checker.After, 100
		}
		row, err := run.Measure(ctx, publish(pubLabel(throughputOpt, agg), cfg))
		if err != nil {
			return err
		}
		row.Note = joinNote(row.Note, publishNote(row))
		run.AddRow(row)
		if !agg {
			thrOff = row
		}
	}
	subTopic := topic()
	topics = append(topics, subTopic)
	if err := e.subscribe(ctx, run, gw, k, subTopic, t); err != nil {
		return err
	}
	gw.Stop()
	if err := fetchMemory(ctx, run, k, newTopic()); err != nil {
		return err
	}
	if err := e.ticker(ctx, run, k, newTopic, t); err != nil {
		return err
	}

	if err := e.faults(ctx, run, k, newTopic); err != nil {
		return err
	}

	// Idle streams: a fresh gateway for each count, so one count's heap
	// does not hide the next one's growth.
	var idleRows []*lab.Row
	for _, shape := range []struct{ streams, conns int }{{1000, 1000}, {10000, 10000}, {10000, 1000}} {
		label := idleLabel(shape.streams, shape.conns)
		g, err := run.StartGateway(ctx, gatewayCPU, gatewayMemMB, onKafka(k))
		if err != nil {
			return err
		}
		tp := topic()
		topics = append(topics, tp)
		row, err := idleRow(ctx, run, g, label, shape.streams, shape.conns, tp, k, t.settle)
		g.Stop()
		if err != nil {
			return err
		}
		run.AddRow(row)
		if shape.streams == 10000 {
			idleRows = append(idleRows, row)
		}
	}

	e.targets(run, echoRows[targetEchoClients], thrOff, idleRows)
	return nil
}

// onKafka is a gateway in front of k with the gateway's defaults.
func onKafka(k *lab.Kafka) gateway.Options {
	return gateway.Options{Config: gateway.Config{Brokers: k.Brokers}}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "; " + b
}

// echoCPUNote sets an echo row's round trips per second of gateway CPU
// (the row's rps over the cores its gateway used, read from its cgroup)
// and says it; "" when the CPU was not measured.
func echoCPUNote(row *lab.Row) string {
	if row.CPUAvg == nil || row.RPS == nil || *row.RPS <= 0 || *row.CPUAvg <= 0 {
		return ""
	}
	perCPU := *row.RPS / *row.CPUAvg
	row.Figures["round_trips_per_gateway_cpu_s"] = perCPU
	return fmt.Sprintf("per gateway CPU-second: %s round trips, %.1f µs of CPU each (%.2f cores)", thousands(int(perCPU)), 1e6/perCPU, *row.CPUAvg)
}

// publishNote says what a publish row's figures mean beyond the table:
// the load on Kafka, the gateway's CPU per message, the delivery.
func publishNote(row *lab.Row) string {
	var notes []string
	if f, ok := row.Figures["kafka_produce_requests_per_s"]; ok {
		notes = append(notes, fmt.Sprintf("the gateway sent Kafka %s produce requests/s, %.2f per message", thousands(int(f)), row.Figures["kafka_produce_requests_per_msg"]))
	}
	if row.CPUAvg != nil && row.RPS != nil && *row.RPS > 0 && *row.CPUAvg > 0 {
		// What a message costs the gateway, whether or not it had its whole
		// CPU: the figure that survives a busy machine and a load generator
		// that cannot keep up.
		row.Figures["gateway_cpu_us_per_msg"] = *row.CPUAvg / *row.RPS * 1e6
		notes = append(notes, fmt.Sprintf("the gateway spent %.1f µs of CPU per message (%.2f cores)", row.Figures["gateway_cpu_us_per_msg"], *row.CPUAvg))
	}
	if row.Lost != nil {
		verdict := "0 lost"
		if *row.Lost > 0 {
			verdict = fmt.Sprintf("%d LOST", *row.Lost)
		}
		notes = append(notes, fmt.Sprintf("delivery verified in every run: %s, %.0f duplicates (median run)", verdict, row.Figures["duplicates"]))
	}
	if e2e, ok := row.Figures["e2e_p99_ms"]; ok {
		notes = append(notes, fmt.Sprintf("end to end p50 %.2f ms, p99 %.2f ms", row.Figures["e2e_p50_ms"], e2e))
	}
	return strings.Join(notes, "; ")
}

// idleRow opens streams (each sends one message, answered), leaves them
// idle and reads the gateway's RSS before and after.
func idleRow(ctx context.Context, run *lab.Run, g *lab.Gateway, label string, streams, conns int, topic string, k *lab.Kafka, settle time.Duration) (*lab.Row, error) {
	run.Progress.Step(label, settle+time.Duration(streams/1000)*time.Second)
	cfg := checker.Config{
		Target: g.GRPC, Topic: topic, Brokers: k.Brokers, Partitions: partitions,
		Scenario: checker.Ticker, Streams: streams, Connections: conns, Aggregation: true,
		Interval: time.Hour, Warmup: -1, Duration: 100 * time.Millisecond,
		GatewayMetrics: g.URL("/metrics"), Settle: settle,
	}
	res, err := checker.Run(ctx, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("lab: databus %s: %w", label, err)
	}
	m := res.Gateway
	row := &lab.Row{Label: label, Runs: 1, Model: "idle", Connections: conns, Errors: res.Errors, StatusCodes: map[string]int64{},
		RSSMBAvg: lab.F(m.RSSOpenMB), RSSMBMax: lab.F(m.RSSOpenMB),
		Figures: map[string]float64{"rss_kb_per_stream": m.KBPerStream, "rss_before_mb": m.RSSBeforeMB, "streams": float64(streams), "open_s": res.OpenSeconds}}
	row.Note = fmt.Sprintf("gateway RSS %.1f MB before, %.1f MB with the streams open and idle: %.1f KB per stream (aggregation on: idle streams hold no producer of their own); opened in %.1f s",
		m.RSSBeforeMB, m.RSSOpenMB, m.KBPerStream, res.OpenSeconds)
	return row, nil
}

// targets notes the speed targets against this run's rows.
func (*Experiment) targets(run *lab.Run, echo, thr *lab.Row, idle []*lab.Row) {
	if echo != nil {
		if perCPU, ok := echo.Figures["round_trips_per_gateway_cpu_s"]; ok {
			run.Note("target: echo >= %s round trips per gateway CPU-second (%d clients): %s, %.2fx the target, %s", thousands(targetEcho), targetEchoClients, thousands(int(perCPU)), perCPU/targetEcho, verdict(perCPU >= targetEcho))
		} else {
			run.Note("target: echo >= %s round trips per gateway CPU-second (%d clients): the gateway's CPU was not measured", thousands(targetEcho), targetEchoClients)
		}
	}
	if thr != nil && thr.RPS != nil {
		if run.Opts.Kafka == lab.KafkaReal {
			run.Note("target: throughput-optimized publish >= %s msgs/s holds through kfake; through the real broker this run measured %s", thousands(targetThroughput), thousands(int(*thr.RPS)))
		} else {
			run.Note("target: throughput-optimized publish >= %s msgs/s at 1 CPU through kfake (%d clients, aggregation off): %s, %s", thousands(targetThroughput), pubClients, thousands(int(*thr.RPS)), verdict(*thr.RPS >= targetThroughput))
		}
	}
	for _, idle := range idle {
		target := targetIdleOwnKB
		if idle.Connections < int(idle.Figures["streams"]) {
			target = targetIdleSharedKB
		}
		kb := idle.Figures["rss_kb_per_stream"]
		run.Note("target: 10,000 idle streams <= %d KB RSS each (%s): %.1f KB, %s", target, idle.Label, kb, verdict(kb <= float64(target)))
	}
	run.Note("the floor of the echo and idle figures while the gateway keeps grpc-go (a bare Recv/Send loop with the gateway's transport settings) is measured by bench/databus.sh beside the gateway's")
	run.Note("the gateway's CPU quota is enforced by cgroups, but the checker (in the lab's process) is not pinned to the other core; bench/databus.sh pins both (taskset)")
}

// thousands formats n with thousands separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

var _ lab.Experiment = (*Experiment)(nil)
