// Package databusexp is report D's experiment: the databus gateway (hlab
// serve databus: gRPC streams in front of Kafka) at 1 CPU, driven by the
// databus checker (internal/checker, through Checker) from the lab's
// process.
//
// Rows: the report's echo table (echo.go: 1 to 100 clients, one message
// per request, each answer awaited; the report's instance had 4 cores,
// ours 1 CPU, so the comparison is per core); the echo server's scaling
// and the cost of its metrics (scaling.go: 50 clients at 1 CPU and
// GOMAXPROCS=1 with metrics, the same with --metrics=false, and at 2
// CPUs and GOMAXPROCS=2, in alternating rounds, with the gateway's floor,
// hlab serve grpcfloor, at 1 CPU and GOMAXPROCS=1 in the same rounds:
// floor.go); publish throughput and
// latency of latency-optimized (one message per request) and
// throughput-optimized (batches of 100; ours: 16 in flight) clients with
// and without aggregation, and many small-batch clients with and without
// it, each request awaited as the report's checker did, and ours with 16
// in flight (publish.go); the publish cost (producer.go): the gateway's CPU per
// message against a franz-go producer writing straight to Kafka from a
// process of its own at 1 CPU (databus-checker --direct), in alternating
// rounds, and with --kafka real against Kafka's own
// kafka-producer-perf-test at 1 CPU; subscribe get-ack cycles per second
// and per gateway CPU-second over drains of a filled topic alone
// (subscribe.go), in alternating rounds with a franz-go consumer draining
// the same topic straight from Kafka from a process of its own at 1 CPU,
// acking and committing as the gateway's subscribers do (subscribecost.go:
// databus-checker --direct --consume only), and with members that process
// each batch for 1 and 10 ms (consumer.go); the compression table (compression.go: bytes to
// Kafka and gateway CPU per message per codec, aggregation off and on;
// quick mode snappy and zstd on compressible values, --full every codec
// on compressible and incompressible ones) and one topic against ten of
// the same partitions in all (topics.go); the gateway's RSS while many groups drain a
// filled topic at --fetch-max-bytes 32 KiB and 50 MB (consumer.go: the
// report's fetch-buffer lesson); ticker publish latency (ticker.go: one
// message a second on each of 1,000 connections with and without
// aggregation, one every 30 s, the report's interval, on each of 10,000
// with it) and the idle-connection-timeout lesson
// (franz-go's ConnIdleTimeout shorter than the interval between a
// stream's messages, against its default); faults (faults.go: the
// gateway SIGKILLed during publish and during subscribe, a member's
// connection reset with messages unacked, in --full with the real
// broker Kafka down for 10 s), each counting lost messages; ours,
// consumers that nack (nacks.go: 1% nacked at 100 ms against none, in
// rounds; poison messages dead-lettered after 3 deliveries while the
// rest flow; the gateway SIGKILLed while retries are pending); and the
// gateway's memory per idle stream at 1,000 and 10,000 streams, the
// two shapes of 10,000 on the floor too (idle.go).
//
// The claims are the report's two statements on aggregation (streams
// sharing the gateway's producers): with many small-batch clients it
// raises throughput and cuts the produce requests Kafka gets; for
// latency-optimized producers it raises latency and lowers throughput.
// Their rows run the report's checker loop, one request in flight per
// stream (the setup beside the report's, item by item, is setup.go).
// Their four rows run in rounds, their order alternating, each run
// verified: every message the gateway acked must reach a consumer group,
// or the row's claims are INVALID; so must every message of the fault
// rows. The targets are our own bounds for the gateway at 1 CPU (echo
// per CPU-second, and against the floor's, publish throughput, CPU per
// message against the direct producer and the direct consumer, memory
// per idle stream beyond the floor's); the ratios shown beside the rows
// are the report's statements that have no bound, and ours on the
// pipelined rows (spec.go).
//
// Kafka is kfake, franz-go's in-memory fake, run as a process of its own
// (hlab serve kfake) so that it neither shares the checker's heap and
// garbage collector nor hides in its CPU figures; --kafka real runs a
// single-node KRaft broker instead.
package databusexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// The gateway's quota: one CPU (the report's instance had 4 cores), and
// memory enough for 10,000 streams.
const (
	gatewayCPU   = 1.0
	gatewayMemMB = 2048
	partitions   = 10
)

// Publishing clients.
const (
	pubClients   = 10  // latency- and throughput-optimized rows
	smallClients = 200 // the claim's many small-batch clients
	// The report's checker loop: send a request, await its answer,
	// repeat. Every claim's rows run it.
	reportInflight = 1
	// Ours: requests in flight per stream of the pipelined rows, which
	// carry no claim.
	pipelinedInflight = 16
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
	pipelined := 2 * r * (t.pubRun + 4*time.Second)                // no warm-up run
	others := 2*run(t.pubRun) + 5*time.Second + pipelined
	idle := 3*t.settle + 25*time.Second       // opening 21,000 streams
	faults := 3 * (t.pubRun + 15*time.Second) // a kill costs a 6 s session
	// The floor's idle rows: 20,000 streams more.
	idle += time.Duration(len(idleFloorShapes)) * (t.settle + 8*time.Second)
	if o.Mode == lab.Full && o.Kafka == lab.KafkaReal {
		faults += 90 * time.Second
	}
	if clusterFault(o) { // the cluster's start, then rows, drains and heals
		faults += 20*time.Second + 200*time.Second
	}
	start := 4 * time.Second // gateways and Kafka
	if o.Kafka == lab.KafkaReal {
		start += 10 * time.Second
	}
	lessons := scalingEstimate(o, t) + tickerEstimate(o, t) + consumerEstimate(o, t) + compressionEstimate(o) + topicsEstimate(o) + nackEstimate(o, t) + replayEstimate
	return echo + pairs + others + subscribeEstimate(t) + faults + idle + start + costEstimate(o, t.pubRun) + lessons
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	b := &bench{run: run, t: timings(run.Opts)}
	b.describe()
	defer b.stop(ctx)
	for _, phase := range []func(context.Context) error{
		b.echo, b.echoScaling, // no Kafka
		b.startKafka, b.claimRows, b.pipelined, b.publishCost, b.throughput, b.subscribe,
		b.compression, b.manyTopics, b.nacks,
		b.stopGateway, // the phases below start gateways of their own
		b.fetchMemory, b.ticker, b.replayFromTime, b.faults, b.clusterFaults, b.idle,
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	return nil
}

// bench is what the phases share: the run, its timing, Kafka, the
// gateway the publish and subscribe rows go through, and the topics made
// (deleted when the experiment ends: kfake keeps every record in memory).
type bench struct {
	run    *lab.Run
	t      timing
	k      *lab.Kafka
	gw     *lab.Gateway
	topics []string
}

// describe records the run's environment and what its clients do.
func (b *bench) describe() {
	run := b.run
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("gateway", fmt.Sprintf("hlab serve databus, %.0f CPU, %d MB (GOMAXPROCS Go's default, which rounds a quota below 2 CPUs up to 2, unless a row says otherwise); the report's instance had %d cores", gatewayCPU, gatewayMemMB, reportCores))
	run.SetEnv("checker", "internal/checker in the lab's process, unconstrained; one gRPC connection per stream unless a row says otherwise; 100-byte values")
	run.SetEnv("method", "the claims' four rows run in rounds, their order alternating, every run verified by a consumer group; other rows one run each (--repeat N for more)")
	run.Note("clients: echo, latency-optimized and the claims' small-batch clients send 1 message per request and await each answer (the report's checker loop); ours: throughput-optimized send batches of 100, 16 in flight, and the pipelined small-batch clients 1 message per request, 16 in flight; values are 100 bytes; rps = messages acked per second, latencies are per request (sent to answered)")
	run.Note("the floor of the echo and idle figures while the gateway keeps grpc-go (hlab serve grpcfloor: a bare Recv/Send loop with the gateway's transport settings) runs on the gateway's quota beside its rows; the targets bound the gateway against it")
	run.Note("the gateway's CPU quota is enforced by cgroups, but the checker (in the lab's process) is not pinned to the other core; bench/databus.sh pins both (taskset)")
}

// startKafka starts Kafka and the gateway in front of it that the
// publish and subscribe rows share.
func (b *bench) startKafka(ctx context.Context) error {
	var err error
	if b.k, err = b.run.StartKafka(ctx, partitions); err != nil {
		return err
	}
	b.run.SetEnv("kafka", b.k.Kind)
	o := onKafka(b.k)
	// The claims' rows publish through this gateway.
	b.run.UsedInFirstClaim(setupGateway, gatewaySetup(gatewayCPU, gatewayMemMB))
	b.run.UsedInFirstClaim(setupLinger, lingerSetup(o.AggregationLinger))
	b.gw, err = b.run.StartGateway(ctx, gatewayCPU, gatewayMemMB, o)
	return err
}

// stopGateway stops the shared gateway.
func (b *bench) stopGateway(context.Context) error {
	if b.gw != nil {
		b.gw.Stop()
		b.gw = nil
	}
	return nil
}

// stop deletes the topics made, then stops the gateway and Kafka.
func (b *bench) stop(ctx context.Context) {
	if b.k == nil {
		return
	}
	for _, tp := range b.topics {
		b.k.DeleteTopic(context.WithoutCancel(ctx), tp)
	}
	b.stopGateway(ctx)
	b.k.Stop()
}

// topic names a fresh topic of the run's, deleted when the experiment
// ends.
func (b *bench) topic() string {
	tp := b.k.Topic(fmt.Sprintf("lab-databus-%d-%d", time.Now().Unix(), len(b.topics)+1))
	b.topics = append(b.topics, tp)
	return tp
}

// onKafka is a gateway in front of k with the gateway's defaults, its
// shared producer's linger set as the Spec declares it.
func onKafka(k *lab.Kafka) gateway.Options {
	return gateway.Options{Config: gateway.Config{Brokers: k.Brokers, AggregationLinger: aggregationLinger}, Kafka: k.Security}
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

// byKey indexes measured rows by key.
func byKey(rows []*labresult.Row) map[labresult.Key]*labresult.Row {
	m := make(map[labresult.Key]*labresult.Row, len(rows))
	for _, r := range rows {
		m[r.Key] = r
	}
	return m
}
