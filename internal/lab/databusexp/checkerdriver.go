package databusexp

import (
	"context"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// Checker drives the databus gateway with its checker (internal/checker):
// one checker run per measured run, the streams opened before the window
// and the delivery verified after it. A message the gateway acked is a
// success; acked and never received by a consumer group is lost
// (lab.Sample.Lost) when the run has consumers. With Config.Consume
// checker.Only the window is the drain of a filled topic alone and the
// successes are the messages received.
type Checker struct {
	// Config is the checker's run; its Duration is the runner's and its
	// OnWindow the runner's window. Its own Warmup (default here half a
	// second) runs inside each run, after the streams open: the ramp of
	// fresh streams stays out of the window.
	Config checker.Config
	// Metrics, when set, is the gateway's /metrics: the Produce requests
	// it sent Kafka in the window give the figures
	// kafka_produce_requests_per_s and kafka_produce_requests_per_msg.
	Metrics string
	// Gateway, when set, is the gateway's process: its CPU over the
	// window, per message acked, gives the figure gateway_cpu_us_per_msg
	// of each run, so that a ratio to another row's CPU per message pairs
	// runs by round.
	Gateway *sandbox.Process
	// KafkaBytes reads, from Metrics before and after each run, the
	// record bytes the gateway wrote to Kafka: per message acked, they
	// give the figures kafka_bytes_per_msg, kafka_raw_bytes_per_msg and
	// compression_ratio (the run must be the gateway's only publisher).
	KafkaBytes bool
}

// checkerWarmup is each checker run's own warm-up.
const checkerWarmup = 500 * time.Millisecond

// produceSeries is the gateway's count of Produce requests to Kafka.
var produceSeries = lab.Counter{Name: "databus_kafka_requests_total", Labels: map[string]string{"api": "Produce"}}

// Drive runs the checker for d.
func (c Checker) Drive(ctx context.Context, d time.Duration, window func(bool)) (*lab.Sample, error) {
	cfg := c.Config
	cfg.Duration = d
	if cfg.Warmup == 0 {
		cfg.Warmup = checkerWarmup
	}
	w := &gatewayWindow{ctx: ctx, metrics: c.Metrics, gateway: c.Gateway, produceFrom: -1, produced: -1}
	defer w.release()
	cfg.OnWindow = func(open bool) {
		if open {
			w.open()
			window(true)
			return
		}
		window(false)
		w.close()
	}
	var bytesBefore [2]float64
	bytesKnown := false
	if c.KafkaBytes {
		bytesBefore, bytesKnown = settledKafkaBytes(ctx, c.Metrics)
	}
	res, err := checker.Run(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	s := checkerSample(res, w.produced)
	if bytesKnown {
		if after, ok := settledKafkaBytes(ctx, c.Metrics); ok {
			kafkaBytesFigures(s, bytesBefore, after, res.Acked)
		}
	}
	if rps := s.Goodput(); w.usage.CPUAvg > 0 && rps > 0 {
		s.Figures[gatewayCPUPerMsg.Name] = w.usage.CPUAvg / rps * 1e6
	}
	return s, nil
}

// gatewayWindow reads, over a checker's window, what the gateway did
// beside it: the Produce requests it sent Kafka (from its /metrics, when
// set) and the CPU it used (when its process is set).
type gatewayWindow struct {
	ctx                   context.Context
	metrics               string
	gateway               *sandbox.Process
	produceFrom, produced float64 // -1: unknown
	meter                 *sandbox.Meter
	usage                 sandbox.Usage
}

func (w *gatewayWindow) open() {
	w.produceFrom = w.readProduce()
	if w.gateway != nil {
		w.meter = w.gateway.Measure()
	}
}

func (w *gatewayWindow) close() {
	if w.meter != nil {
		w.usage = w.meter.Stop()
	}
	if to := w.readProduce(); to >= 0 && w.produceFrom >= 0 {
		w.produced = to - w.produceFrom
	}
}

// release stops the meter of a run that failed before its window closed
// (a Meter's Stop is idempotent).
func (w *gatewayWindow) release() {
	if w.meter != nil {
		w.meter.Stop()
	}
}

// readProduce reads the gateway's count of Produce requests; -1 when
// unknown.
func (w *gatewayWindow) readProduce() float64 {
	if w.metrics == "" {
		return -1
	}
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Second)
	defer cancel()
	m, err := lab.ScrapeMetrics(ctx, w.metrics)
	if err != nil {
		return -1
	}
	return m.Sum(produceSeries.Name, produceSeries.Labels)
}

// CheckerSample converts the result of a checker that ran elsewhere (a
// process of its own, its --json output) into a run's sample.
func CheckerSample(res *checker.Result) *lab.Sample { return checkerSample(res, -1) }

// checkerSample converts a checker's result; produced is the Produce
// requests the gateway sent Kafka in the window (-1: unknown).
func checkerSample(res *checker.Result, produced float64) *lab.Sample {
	win := time.Duration(res.DurationS * float64(time.Second))
	ok := int64(res.MsgsPerSec*res.DurationS + 0.5)
	s := &lab.Sample{Model: "closed", Connections: res.Streams, Window: win, Successes: ok, Requests: ok,
		StatusCodes: map[string]int64{}, Errors: map[string]int64{}, Figures: map[string]float64{batchesPerS.Name: res.BatchesPerSec}}
	if res.Failed > 0 && res.Acked > 0 {
		// Failures are counted over the whole run: scale them to the window.
		s.Requests = int64(float64(ok) * float64(res.Acked+res.Failed) / float64(res.Acked))
	}
	for k, v := range res.Errors {
		s.Errors[k] += v
	}
	l := res.PublishLatency
	dur := func(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
	s.Latency = loadgen.Latencies{Mean: dur(l.Mean), P50: dur(l.P50), P90: dur(l.P90), P99: dur(l.P99), P999: dur(l.P999), Max: dur(l.Max)}
	s.Percentiles = []labresult.Percentile{{Q: 50, MS: l.P50}, {Q: 90, MS: l.P90}, {Q: 99, MS: l.P99}, {Q: 99.9, MS: l.P999}, {Q: 100, MS: l.Max}}
	if d := res.Delivery; d != nil {
		lost := d.Lost
		s.Lost = &lost
		s.Figures[duplicates.Name] = float64(d.Duplicates)
		s.Figures[receivedPerS.Name] = d.ReceivedPerSec
		s.Figures[cyclesPerS.Name] = d.CyclesPerSec
		s.Figures[received.Name] = float64(d.Received)
		nackFigures(func(m labresult.Metric, v float64) { s.Figures[m.Name] = v }, d)
	}
	if d := res.Delivery; d != nil && d.Consume == checker.Only {
		// A drain of a filled topic: its requests are the messages
		// received, over the drain; no latency is measured.
		s.Window = time.Duration(d.DrainS * float64(time.Second))
		s.Successes, s.Requests, s.Connections = d.Received, d.Received, d.Groups*d.Members
		s.Latency, s.Percentiles = loadgen.Latencies{}, nil
	}
	if e := res.E2ELatency; e != nil && e.Count > 0 {
		s.Figures[e2eP50MS.Name], s.Figures[e2eP99MS.Name], s.Figures[e2eP999MS.Name] = e.P50, e.P99, e.P999
	}
	if produced > 0 && res.DurationS > 0 {
		// The load on Kafka: what aggregation is for.
		s.Figures[kafkaProducePerS.Name] = produced / res.DurationS
		if ok > 0 {
			s.Figures[kafkaProducePerMsg.Name] = produced / float64(ok)
		}
	}
	return s
}

var _ lab.Driver = Checker{}
