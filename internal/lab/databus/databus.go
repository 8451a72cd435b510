// Package databus is report D's experiment: the databus gateway (hlab
// serve databus: gRPC streams in front of Kafka) at 1 CPU, driven by the
// databus checker (internal/checker) from the lab's process.
//
// Rows: the report's echo table (1 to 100 clients, one message per
// request, each answer awaited; the report's instance had 4 cores, ours
// 1 CPU, so the comparison is per core); publish throughput and latency of
// latency-optimized (one message per request) and throughput-optimized
// (batches of 100, pipelined) clients with and without aggregation;
// subscribe get-ack cycles; and the gateway's memory per idle stream at
// 1,000 and 10,000 streams. The claim: aggregation (streams sharing the
// gateway's producers) raises publish throughput for many small-batch
// clients.
//
// Kafka is kfake, franz-go's in-memory fake, run as a process of its own
// (hlab serve kfake) so that it neither shares the checker's heap and
// garbage collector nor hides in its CPU figures; --kafka real runs a
// single-node KRaft broker instead.
package databus

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
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
	targetEchoClients = 50     // the report's 300,808 msg/s row: 75k per core
	targetEcho        = 75000  // round trips/s
	targetThroughput  = 200000 // msgs/s, throughput-optimized, through kfake
	targetIdleKB      = 40     // RSS per idle stream at 10,000 streams
)

// Publishing clients.
const (
	pubClients   = 10  // latency- and throughput-optimized rows
	smallClients = 200 // the claim's many small-batch clients
)

// Row labels; the claim refers to them.
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
	subscribeRow  = "subscribe: 1 group x 4 members, after publishing"
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
	return "gRPC streaming gateway in front of Kafka: echo, publish with/without aggregation, subscribe, idle streams (report D)"
}

func (*Experiment) Claims() []lab.Claim {
	return []lab.Claim{{
		Text:      fmt.Sprintf("aggregation raises publish throughput for many small-batch clients (%d clients, 1 msg/request): >= 1.5x", smallClients),
		Metric:    "rps",
		Numerator: smallLabel(true), Denominator: smallLabel(false),
		AtLeast: 1.5,
	}}
}

// timing is how long the parts of a mode take.
type timing struct {
	echoWarm, echoRun time.Duration
	pubWarm, pubRun   time.Duration
	settle            time.Duration // idle streams before reading RSS
	repeats           int
}

func timings(o lab.Options) timing {
	t := timing{echoWarm: 300 * time.Millisecond, echoRun: 1500 * time.Millisecond,
		pubWarm: 500 * time.Millisecond, pubRun: 2 * time.Second, settle: 2 * time.Second, repeats: 1}
	if o.Mode == lab.Full {
		// The report's echo runs took 3.5-29 s (100,000 messages per client).
		t = timing{echoWarm: time.Second, echoRun: 10 * time.Second,
			pubWarm: 2 * time.Second, pubRun: 20 * time.Second, settle: 5 * time.Second, repeats: 3}
	}
	if o.Repeat > 0 {
		t.repeats = o.Repeat
	}
	return t
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	t := timings(o)
	r := time.Duration(t.repeats)
	echo := time.Duration(len(echoClients)) * r * (t.echoWarm + t.echoRun)
	pub := 4*r*(t.pubWarm+t.pubRun) + 2*time.Duration(max(t.repeats, 3))*(t.pubWarm+t.pubRun)
	consume := r * 5 * time.Second
	idle := 3*t.settle + 25*time.Second // opening 21,000 streams
	start := 4 * time.Second            // gateways and Kafka
	if o.Kafka == lab.KafkaReal {
		start += 10 * time.Second
	}
	return echo + pub + consume + idle + start
}

// gateway is a running "hlab serve databus".
type gateway struct {
	svc  *lab.Service
	addr string // gRPC
}

func startGateway(ctx context.Context, run *lab.Run, args ...string) (*gateway, error) {
	var lastErr error
	for range 3 { // a free port can be taken before the gateway binds it
		port, err := deps.FreePort()
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		svc, err := run.StartService(ctx, "databus", gatewayCPU, gatewayMemMB, append(slices.Clone(args), "--grpc-addr", addr)...)
		if err == nil {
			return &gateway{svc: svc, addr: addr}, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func (g *gateway) stop() {
	if g != nil {
		g.svc.Stop()
	}
}

// measured is one checker result with the gateway's usage in its window.
type measured struct {
	res   *checker.Result
	usage sandbox.Usage
	// produce is how many Produce requests the gateway wrote to Kafka in
	// the window (-1: unknown).
	produce float64
}

// measure runs cfg repeats times against g and returns the runs.
func measure(ctx context.Context, run *lab.Run, g *gateway, label string, repeats int, cfg checker.Config) ([]measured, error) {
	var out []measured
	for i := range repeats {
		run.Progress.Step(fmt.Sprintf("%s: run %d/%d", label, i+1, repeats), max(cfg.Warmup, 0)+cfg.Duration)
		var (
			meter       *sandbox.Meter
			m           = measured{produce: -1}
			produceFrom float64
			produceErr  error
		)
		c := cfg
		c.Target = g.addr
		c.OnWindow = func(open bool) {
			if open {
				meter = g.svc.Proc.Measure()
				produceFrom, produceErr = produceRequests(ctx, g.svc.URL("/metrics"))
			} else if meter != nil {
				m.usage = meter.Stop()
				if to, err := produceRequests(ctx, g.svc.URL("/metrics")); err == nil && produceErr == nil {
					m.produce = to - produceFrom
				}
			}
		}
		res, err := checker.Run(ctx, c, nil)
		if err != nil {
			return nil, fmt.Errorf("lab: databus %s: %w", label, err)
		}
		select {
		case <-g.svc.Proc.Done():
			return nil, fmt.Errorf("lab: databus %s: the gateway died during the run: %v", label, g.svc.Proc.ExitErr())
		default:
		}
		m.res = res
		out = append(out, m)
	}
	return out, nil
}

// publishRow makes a row of publish runs: messages/s and publish latency
// (per request), medians over the runs.
func publishRow(label string, runs []measured, ref *lab.Ref) *lab.Row {
	row := &lab.Row{Label: label, Runs: len(runs), Ref: ref, Model: "closed", Errors: map[string]int64{}, StatusCodes: map[string]int64{}}
	med := func(get func(measured) float64) *float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return lab.F(v[len(v)/2])
		}
		return lab.F((v[len(v)/2-1] + v[len(v)/2]) / 2)
	}
	row.RPS = med(func(m measured) float64 { return m.res.MsgsPerSec })
	row.MeanMS = med(func(m measured) float64 { return m.res.PublishLatency.Mean })
	row.P50MS = med(func(m measured) float64 { return m.res.PublishLatency.P50 })
	row.P90MS = med(func(m measured) float64 { return m.res.PublishLatency.P90 })
	row.P99MS = med(func(m measured) float64 { return m.res.PublishLatency.P99 })
	row.P999MS = med(func(m measured) float64 { return m.res.PublishLatency.P999 })
	row.MaxMS = med(func(m measured) float64 { return m.res.PublishLatency.Max })
	row.CPUAvg = med(func(m measured) float64 { return m.usage.CPUAvg })
	row.RSSMBAvg = med(func(m measured) float64 { return m.usage.RSSMBAvg })
	row.RSSMBMax = med(func(m measured) float64 { return m.usage.RSSMBMax })
	row.SuccessRatio = med(func(m measured) float64 {
		if n := m.res.Acked + m.res.Failed; n > 0 {
			return float64(m.res.Acked) / float64(n)
		}
		return 0
	})
	rps := make([]float64, len(runs))
	for i, r := range runs {
		rps[i] = r.res.MsgsPerSec
		row.Requests += r.res.Acked
		row.Throttled += r.usage.Throttled
		for k, v := range r.res.Errors {
			row.Errors[k] += v
		}
	}
	row.RPSMin, row.RPSMax = lab.F(slices.Min(rps)), lab.F(slices.Max(rps))
	first := runs[0].res
	row.Connections = first.Streams
	mid := runs[0]
	for _, r := range runs {
		if abs(r.res.MsgsPerSec-*row.RPS) < abs(mid.res.MsgsPerSec-*row.RPS) {
			mid = r
		}
	}
	l := mid.res.PublishLatency
	row.Percentiles = []lab.Percentile{{Q: 50, MS: l.P50}, {Q: 90, MS: l.P90}, {Q: 99, MS: l.P99}, {Q: 99.9, MS: l.P999}, {Q: 100, MS: l.Max}}
	row.Figures = map[string]float64{"batches_per_s": mid.res.BatchesPerSec}
	if mid.usage.CPUAvg > 0 && mid.res.MsgsPerSec > 0 {
		// What a message costs the gateway, whether or not it had its whole
		// CPU: the figure that survives a busy machine and a load generator
		// that cannot keep up.
		row.Figures["gateway_cpu_us_per_msg"] = mid.usage.CPUAvg / mid.res.MsgsPerSec * 1e6
	}
	if mid.produce > 0 && mid.res.DurationS > 0 {
		// The load on Kafka: what aggregation is for.
		row.Figures["kafka_produce_requests_per_s"] = mid.produce / mid.res.DurationS
		row.Figures["msgs_per_produce_request"] = mid.res.MsgsPerSec * mid.res.DurationS / mid.produce
	}
	if d := mid.res.Delivery; d != nil {
		row.Figures["lost"] = float64(d.Lost)
		row.Figures["duplicates"] = float64(d.Duplicates)
	}
	if e := mid.res.E2ELatency; e != nil && e.Count > 0 {
		row.Figures["e2e_p50_ms"], row.Figures["e2e_p99_ms"], row.Figures["e2e_p999_ms"] = e.P50, e.P99, e.P999
	}
	return row
}

func abs(x float64) float64 { return max(x, -x) }

// deliveryNote says what the verification found, for a row's note.
func deliveryNote(runs []measured) string {
	var lost, dups, acked int64
	for _, r := range runs {
		if d := r.res.Delivery; d != nil {
			lost += d.Lost
			dups += d.Duplicates
			acked += d.Acked
		}
	}
	verdict := "0 lost"
	if lost > 0 {
		verdict = fmt.Sprintf("%d LOST", lost)
	}
	return fmt.Sprintf("delivery verified: %d acked messages, %s, %d duplicates", acked, verdict, dups)
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	t := timings(run.Opts)
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("gateway", fmt.Sprintf("hlab serve databus, %.0f CPU, %d MB (GOMAXPROCS follows the quota); the report's instance had %d cores", gatewayCPU, gatewayMemMB, reportCores))
	run.SetEnv("checker", "internal/checker in the lab's process, unconstrained; one gRPC connection per stream unless a row says otherwise; 100-byte values")
	run.Note("clients: echo and latency-optimized send 1 message per request and await each answer; throughput-optimized send batches of 100, 16 in flight; small-batch send 1 message per request, 16 in flight; values are 100 bytes; rps = messages/s, latencies are per request (sent to answered)")
	if t.repeats == 1 {
		run.Note("each row is one run (--repeat N for more), but the claim's two rows three each, taking turns; quick mode runs each row for %v after a %v warm-up (echo: %v after %v); --full runs %v",
			t.pubRun, t.pubWarm, t.echoRun, t.echoWarm, timings(lab.Options{Mode: lab.Full}).pubRun)
	}

	// Echo: the transport alone, no Kafka.
	gw, err := startGateway(ctx, run, "--echo")
	if err != nil {
		return err
	}
	echoRows := map[int]*lab.Row{}
	for _, n := range echoClients {
		label := echoLabel(n)
		runs, err := measure(ctx, run, gw, label, t.repeats, checker.Config{
			Scenario: checker.Echo, Streams: n, Warmup: t.echoWarm, Duration: t.echoRun,
		})
		if err != nil {
			gw.stop()
			return err
		}
		row := publishRow(label, runs, &lab.Ref{RPS: lab.F(echoRef[n])})
		perCore := echoRef[n] / reportCores
		row.Note = fmt.Sprintf("per core: report %s msg/s (4 cores), ours %s at 1 CPU: %.2fx", thousands(int(perCore)), thousands(int(*row.RPS)), *row.RPS/perCore)
		run.AddRow(row)
		echoRows[n] = row
	}
	gw.stop()

	// Publishing through Kafka.
	k, err := run.StartKafka(ctx, partitions)
	if err != nil {
		return err
	}
	defer k.Stop()
	run.SetEnv("kafka", k.Kind)
	gw, err = startGateway(ctx, run, "--brokers", k.Brokers[0])
	if err != nil {
		return err
	}
	defer func() { gw.stop() }()
	topicSeq := 0
	topic := func() string {
		topicSeq++
		return fmt.Sprintf("lab-databus-%d-%d", time.Now().Unix(), topicSeq)
	}
	publishN := func(label string, repeats int, cfg checker.Config) ([]measured, error) {
		cfg.Topic, cfg.Brokers, cfg.Partitions = topic(), k.Brokers, partitions
		cfg.Warmup, cfg.Duration = t.pubWarm, t.pubRun
		runs, err := measure(ctx, run, gw, label, repeats, cfg)
		// kfake keeps every record in memory: drop what a row wrote.
		k.DeleteTopic(ctx, cfg.Topic)
		return runs, err
	}
	publish := func(label string, cfg checker.Config) ([]measured, error) {
		return publishN(label, t.repeats, cfg)
	}
	var thrOff *lab.Row
	for _, agg := range []bool{false, true} {
		label := pubLabel(latencyOpt, agg)
		runs, err := publish(label, checker.Config{
			Scenario: checker.Latency, Streams: pubClients, Aggregation: agg,
			Groups: 1, Members: 2, // concurrent: end-to-end latency, verified
		})
		if err != nil {
			return err
		}
		row := publishRow(label, runs, nil)
		row.Note = deliveryNote(runs)
		if e2e, ok := row.Figures["e2e_p99_ms"]; ok {
			row.Note += fmt.Sprintf("; end to end p50 %.2f ms, p99 %.2f ms", row.Figures["e2e_p50_ms"], e2e)
		}
		run.AddRow(row)
	}
	for _, agg := range []bool{false, true} {
		label := pubLabel(throughputOpt, agg)
		cfg := checker.Config{Scenario: checker.Throughput, Streams: pubClients, Aggregation: agg}
		if !agg {
			// Verified by consumers that start once publishing ended, so
			// they do not compete with it; they make the subscribe row.
			cfg.Groups, cfg.Members, cfg.Consume, cfg.SubBatch = 1, 4, checker.After, 100
		}
		runs, err := publish(label, cfg)
		if err != nil {
			return err
		}
		row := publishRow(label, runs, nil)
		if !agg {
			row.Note = deliveryNote(runs)
			thrOff = row
		}
		run.AddRow(row)
		if !agg {
			run.AddRow(subscribeFrom(runs))
		}
	}
	// The claim's rows take turns, run by run, so that whatever else the
	// machine does weighs on both alike; at least 3 runs each.
	claimRuns := map[bool][]measured{}
	for range max(t.repeats, 3) {
		for _, agg := range []bool{false, true} {
			runs, err := publishN(smallLabel(agg), 1, checker.Config{
				Scenario: checker.Throughput, Streams: smallClients, Batch: 1, Inflight: 16, Aggregation: agg,
			})
			if err != nil {
				return err
			}
			claimRuns[agg] = append(claimRuns[agg], runs...)
		}
	}
	for _, agg := range []bool{false, true} {
		label := smallLabel(agg)
		row := publishRow(label, claimRuns[agg], nil)
		var notes []string
		if f, ok := row.Figures["kafka_produce_requests_per_s"]; ok {
			notes = append(notes, fmt.Sprintf("the gateway sent Kafka %s produce requests/s, %.1f messages each", thousands(int(f)), row.Figures["msgs_per_produce_request"]))
		}
		if us, ok := row.Figures["gateway_cpu_us_per_msg"]; ok {
			notes = append(notes, fmt.Sprintf("the gateway spent %.1f µs of CPU per message (%.2f cores)", us, *row.CPUAvg))
		}
		row.Note = strings.Join(notes, "; ")
		run.AddRow(row)
	}
	gw.stop()

	// Idle streams: a fresh gateway for each count, so one count's heap
	// does not hide the next one's growth.
	var idleTarget *lab.Row
	for _, shape := range []struct{ streams, conns int }{{1000, 1000}, {10000, 10000}, {10000, 1000}} {
		label := idleLabel(shape.streams, shape.conns)
		gw, err = startGateway(ctx, run, "--brokers", k.Brokers[0])
		if err != nil {
			return err
		}
		row, err := idleRow(ctx, run, gw, label, shape.streams, shape.conns, topic(), k, t.settle)
		gw.stop()
		if err != nil {
			return err
		}
		run.AddRow(row)
		if shape.streams == 10000 && shape.conns == 1000 {
			idleTarget = row
		}
	}
	gw = nil

	e.targets(run, echoRows[targetEchoClients], thrOff, idleTarget)
	return nil
}

// subscribeFrom makes the subscribe row from the consumers that read a
// throughput row's topic after it was written.
func subscribeFrom(runs []measured) *lab.Row {
	row := &lab.Row{Label: subscribeRow, Runs: len(runs), Model: "closed", Errors: map[string]int64{}, StatusCodes: map[string]int64{}}
	var rates, cycles []float64
	for _, r := range runs {
		if d := r.res.Delivery; d != nil {
			rates = append(rates, d.ReceivedPerSec)
			cycles = append(cycles, d.CyclesPerSec)
			row.Requests += d.Received
		}
	}
	if len(rates) == 0 {
		return row
	}
	slices.Sort(rates)
	slices.Sort(cycles)
	row.RPS, row.RPSMin, row.RPSMax = lab.F(rates[len(rates)/2]), lab.F(rates[0]), lab.F(rates[len(rates)-1])
	row.Connections = 4
	row.Figures = map[string]float64{"cycles_per_s": cycles[len(cycles)/2]}
	row.Note = fmt.Sprintf("messages/s received; %s get-ack cycles/s (a cycle: a batch received, then acked); the topic held what the row above published", thousands(int(cycles[len(cycles)/2])))
	return row
}

// idleRow opens streams (each sends one message, answered), leaves them
// idle and reads the gateway's RSS before and after.
func idleRow(ctx context.Context, run *lab.Run, g *gateway, label string, streams, conns int, topic string, k *lab.Kafka, settle time.Duration) (*lab.Row, error) {
	run.Progress.Step(label, settle+time.Duration(streams/1000)*time.Second)
	cfg := checker.Config{
		Target: g.addr, Topic: topic, Brokers: k.Brokers, Partitions: partitions,
		Scenario: checker.Ticker, Streams: streams, Connections: conns, Aggregation: true,
		Interval: time.Hour, Warmup: -1, Duration: 100 * time.Millisecond,
		GatewayMetrics: g.svc.URL("/metrics"), Settle: settle,
	}
	res, err := checker.Run(ctx, cfg, nil)
	defer k.DeleteTopic(ctx, topic)
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
func (*Experiment) targets(run *lab.Run, echo, thr, idle *lab.Row) {
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	if echo != nil && echo.RPS != nil {
		run.Note("target: echo >= %s round trips/s at 1 CPU (%d clients): %s, %s", thousands(targetEcho), targetEchoClients, thousands(int(*echo.RPS)), verdict(*echo.RPS >= targetEcho))
	}
	if thr != nil && thr.RPS != nil {
		if run.Opts.Kafka == lab.KafkaReal {
			run.Note("target: throughput-optimized publish >= %s msgs/s holds through kfake; through the real broker this run measured %s", thousands(targetThroughput), thousands(int(*thr.RPS)))
		} else {
			run.Note("target: throughput-optimized publish >= %s msgs/s at 1 CPU through kfake (%d clients, aggregation off): %s, %s", thousands(targetThroughput), pubClients, thousands(int(*thr.RPS)), verdict(*thr.RPS >= targetThroughput))
		}
	}
	if idle != nil {
		kb := idle.Figures["rss_kb_per_stream"]
		run.Note("target: 10,000 idle streams <= %d KB RSS each (%s): %.1f KB, %s", targetIdleKB, idle.Label, kb, verdict(kb <= targetIdleKB))
	}
	run.Note("the gateway's CPU quota is enforced by cgroups, but the checker (in the lab's process) is not pinned to the other core; bench/databus.sh pins both (taskset)")
}

// produceRequests reads the gateway's count of Produce requests written to
// Kafka from its /metrics.
func produceRequests(ctx context.Context, metricsURL string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `databus_kafka_requests_total{api="Produce"} `); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, nil // none written yet
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
