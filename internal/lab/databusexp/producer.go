package databusexp

// The gateway's publish cost against producers that write to Kafka
// themselves: a franz-go producer set up as the gateway's own
// per-stream producer (databus-checker --direct), measured in rounds
// with the gateway, the target their CPU per message paired by round;
// and, with the real broker, Kafka's own producer benchmark
// (kafka-producer-perf-test.sh's ProducerPerformance). Each runs as a
// process of its own at 1 CPU, as the gateway does, and its CPU is the
// kernel's count for that process, not the load generator's.
//
// The target's pair runs both sides at one offered rate (costRate):
// most of a producer's cost per message is per Kafka produce request,
// and a producer that runs faster puts more records in each. Run as
// fast as each can, the direct producer has a core of its own while the
// gateway's clients share theirs with Kafka (kfake), so it runs faster
// and pays less per message for that alone. The pair at full speed is
// still measured (--full, and with the real broker beside the perf
// test), its ratio shown beside the target's; every row says its
// records per produce request.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// The cost rows run in costRounds rounds, so that the target's ratio
// has an interval.
const (
	costRounds  = 3
	recordBytes = 100 // the checker's values, the perf test's records
)

// costRate is the messages per second both sides of the target's pair
// are offered: the report's throughput figure, below what either reaches
// at 1 CPU (about a million here), so that both put about the same
// records in each produce request.
const costRate = 200_000

// The pair at full speed, and the pair at costRate, the target's.
const (
	costGatewayAtRate labresult.Key = "publish-cost/gateway-at-rate"
	costDirectAtRate  labresult.Key = "publish-cost/direct-at-rate"
)

var (
	atRate                 = fmt.Sprintf(", %s msgs/s offered", thousands(costRate))
	costGatewayAtRateLabel = costGatewayLabel + atRate
	directAtRateLabel      = directLabel + atRate
)

// recordsPerProduce is each cost row's records per Kafka produce
// request, beside its CPU per message.
var recordsPerProduce = labresult.Metric{Name: "records_per_produce_request", Better: labresult.Neither,
	Doc: "messages acked per Produce request sent to Kafka in the window: a producer's cost per message falls as it grows"}

// runsFullSpeedCost reports whether the cost pair at full speed runs
// with o: in --full, and beside the perf test, whose gateway row it is.
func runsFullSpeedCost(o lab.Options) bool { return o.Mode == lab.Full || runsPerfTest(o) }

// costRows are the publish cost's rows.
func costRows(o lab.Options) []lab.RowSpec {
	out := []lab.RowSpec{lab.Row(costGatewayAtRate, costGatewayAtRateLabel), lab.Row(costDirectAtRate, directAtRateLabel)}
	if runsFullSpeedCost(o) {
		out = append(out, lab.Row(costGateway, costGatewayLabel), lab.Row(costDirect, directLabel))
	}
	if runsPerfTest(o) {
		out = append(out, lab.Row(costPerfTest, perfLabel))
	}
	return out
}

// perfRecords is how many records the perf test sends: at the 100k-400k
// records/s seen at 1 CPU, 5-20 s in --quick.
func perfRecords(o lab.Options) int {
	if o.Mode == lab.Full {
		return 10_000_000
	}
	return 2_000_000
}

// costEstimate is what publishCost adds to the experiment's time.
func costEstimate(o lab.Options, pubRun time.Duration) time.Duration {
	pairs := 1
	if runsFullSpeedCost(o) {
		pairs = 2
	}
	d := time.Duration(pairs) * (2*o.Warmup() + costRounds*2*(pubRun+4*time.Second)) // a direct run starts a process and its clients
	if o.Kafka == lab.KafkaReal {
		d += 40 * time.Second // two JVMs: a short run for their start, then the benchmark
	}
	return d
}

// costTargets are the publish cost's target and, with the real broker,
// the ratios to Kafka's own producer benchmark.
func costTargets(o lab.Options) []labresult.Target {
	t := []labresult.Target{{
		Key: "publish-cost-cpu-per-msg",
		Text: fmt.Sprintf("publish cost: the gateway's CPU per message at most %.1fx a direct franz-go producer's (%d throughput-optimized clients, aggregation off, both offered %s msgs/s, each at 1 CPU, through the run's Kafka, runs alternating, paired by round)",
			targetCostRatio, pubClients, thousands(costRate)),
		Ratio: &labresult.Ratio{Num: costGatewayAtRate, Den: costDirectAtRate, Metric: gatewayCPUPerMsg.Name, DenMetric: producerCPUPerMsg.Name},
		Bound: labresult.AtMost(targetCostRatio),
	}}
	if runsFullSpeedCost(o) {
		t = append(t, labresult.Target{
			Key:   "publish-cost-cpu-per-msg-full-speed",
			Text:  fmt.Sprintf("publish cost at full speed: the gateway's CPU per message over a direct franz-go producer's, each as fast as it goes (%d throughput-optimized clients, aggregation off, each at 1 CPU; the direct producer's clients do not share a core with Kafka, so it runs faster, with more records per produce request)", pubClients),
			Ratio: &labresult.Ratio{Num: costGateway, Den: costDirect, Metric: gatewayCPUPerMsg.Name, DenMetric: producerCPUPerMsg.Name},
		})
	}
	if !runsPerfTest(o) {
		return t
	}
	against := fmt.Sprintf("against Kafka's own producer (kafka-producer-perf-test, %d-byte records, acks=all, each at 1 CPU, real broker, the JVM's start included)", recordBytes)
	return append(t, labresult.Target{
		Key:   "publish-cost-gateway-over-perf-test",
		Text:  "publish cost: the gateway's msgs per gateway CPU-second over the perf test's records per JVM CPU-second, " + against,
		Ratio: &labresult.Ratio{Num: costGateway, Den: costPerfTest, Metric: msgsPerGatewayCPU.Name, DenMetric: recordsPerCPU.Name},
	}, labresult.Target{
		Key:   "publish-cost-gateway-and-checker-over-perf-test",
		Text:  "publish cost: the gateway's msgs per CPU-second of the gateway and the checker together over the perf test's records per JVM CPU-second, " + against,
		Ratio: &labresult.Ratio{Num: costGateway, Den: costPerfTest, Metric: "msgs_per_gateway_and_checker_cpu_s", Of: withCheckerOverPerf},
	})
}

// withCheckerOverPerf is the gateway row's msgs per CPU-second of the
// gateway and the checker over the perf test's records per CPU-second.
func withCheckerOverPerf(gw, perf map[string]float64) (float64, bool) {
	cpu := gw[labresult.CPUAvg.Name] + gw[checkerCPU.Name]
	per := perf[recordsPerCPU.Name]
	if _, ok := gw[checkerCPU.Name]; !ok || cpu <= 0 || per <= 0 {
		return 0, false
	}
	return gw[labresult.RPS.Name] / cpu / per, true
}

// publishCost measures the gateway's CPU per message against the direct
// producer's in rounds, then, with the real broker, Kafka's perf test,
// and adds the rows.
func (b *bench) publishCost(ctx context.Context) error {
	if _, err := b.costPair(ctx, costGatewayAtRate, costDirectAtRate, costRate); err != nil {
		return err
	}
	if !runsFullSpeedCost(b.run.Opts) {
		return nil
	}
	gw, err := b.costPair(ctx, costGateway, costDirect, 0)
	if err != nil || !runsPerfTest(b.run.Opts) {
		return err
	}
	perf, err := b.perfTestRow(ctx)
	if err != nil {
		return err
	}
	b.run.AddRow(perf)
	if gw.RPS != nil && gw.CPUAvg != nil && *gw.CPUAvg > 0 {
		gw.Set(msgsPerGatewayCPU, *gw.RPS / *gw.CPUAvg)
	}
	return nil
}

// costPair measures the gateway's row gwKey and the direct producer's
// directKey in alternating rounds, both offered rate msgs/s (0: each as
// fast as it goes), adds the rows and returns the gateway's.
func (b *bench) costPair(ctx context.Context, gwKey, directKey labresult.Key, rate float64) (*labresult.Row, error) {
	gwM := b.publish(gwKey, checker.Config{Scenario: checker.Throughput, Streams: pubClients, Rate: rate})
	gwM.Driver = withOwnCPU{gwM.Driver}
	tp := b.topic()
	if err := b.k.CreateTopic(ctx, tp, partitions); err != nil {
		return nil, err
	}
	directM := lab.Measurement{Key: directKey, Duration: b.t.pubRun, Steady: b.k.JVM,
		Driver: &directProducer{directClient: b.direct(tp), rate: rate}}
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{gwM, directM}, MinRounds: costRounds, MaxRounds: costRounds})
	if err != nil {
		return nil, err
	}
	var gw *labresult.Row
	for _, row := range rows {
		if row.Key == gwKey {
			gw = row
			publishNote(row)
			checkerCPUNote(row)
		} else {
			directNote(row)
		}
		rateNote(row, rate)
		b.run.AddRow(row)
	}
	return gw, nil
}

// rateNote says a cost row's records per produce request, and whether it
// reached the rate it was offered: one that did not was not matched.
func rateNote(row *labresult.Row, rate float64) {
	if r := row.Get(recordsPerProduce); r != nil {
		row.AddNote("%.0f records per Kafka produce request", *r)
	}
	if rate > 0 && row.RPS != nil && *row.RPS < 0.95*rate {
		row.AddNote("offered %s msgs/s, reached %s: below the rate, so its records per produce request are not the other side's", thousands(int(rate)), thousands(int(*row.RPS)))
	}
}

// setRecordsPerProduce derives a run's records per produce request from
// its produce requests per message.
func setRecordsPerProduce(s *lab.Sample) {
	if s != nil && s.Figures[kafkaProducePerMsg.Name] > 0 {
		s.Figures[recordsPerProduce.Name] = 1 / s.Figures[kafkaProducePerMsg.Name]
	}
}

// withOwnCPU is a driver that also measures the CPU of the lab's own
// process over the window (figure checker_cpu_cores): the checker, which
// runs in it, is the gateway's client, as the perf test is its own.
type withOwnCPU struct{ lab.Driver }

func (w withOwnCPU) Drive(ctx context.Context, d time.Duration, window func(bool)) (*lab.Sample, error) {
	var from, to time.Time
	var cpuFrom, cpuTo float64
	s, err := w.Driver.Drive(ctx, d, func(open bool) {
		if open {
			from, cpuFrom = time.Now(), checker.ProcessCPU()
		} else {
			to, cpuTo = time.Now(), checker.ProcessCPU()
		}
		window(open)
	})
	setRecordsPerProduce(s)
	if err != nil || from.IsZero() || !to.After(from) {
		return s, err
	}
	if s.Figures == nil {
		s.Figures = map[string]float64{}
	}
	s.Figures[checkerCPU.Name] = (cpuTo - cpuFrom) / to.Sub(from).Seconds()
	return s, nil
}

// directProducer runs "hlab databus-checker --direct" as a process of its
// own at 1 CPU for each run, and measures that process's CPU (its cgroup,
// or /proc without one) over the window the checker says it measured.
type directProducer struct {
	directClient
	rate float64 // messages per second offered (--rate); 0: as fast as it goes
}

func (p *directProducer) Drive(ctx context.Context, d time.Duration, window func(bool)) (*lab.Sample, error) {
	args := []string{"--partitions", strconv.Itoa(partitions), "--scenario", string(checker.Throughput), "--streams", strconv.Itoa(pubClients),
		"--size", strconv.Itoa(recordBytes), "--warmup", "500ms", "--duration", d.String()}
	if p.rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(p.rate, 'f', -1, 64))
	}
	res, usage, err := p.check(ctx, "direct-producer", window, args...)
	if err != nil {
		return nil, err
	}
	s := CheckerSample(res)
	s.Figures[producerCPU.Name] = usage.CPUAvg
	if res.MsgsPerSec > 0 {
		s.Figures[producerCPUPerMsg.Name] = usage.CPUAvg / res.MsgsPerSec * 1e6
	}
	if n := res.MsgsPerSec * res.DurationS; res.ProduceRequests > 0 && n > 0 {
		s.Figures[kafkaProducePerMsg.Name] = float64(res.ProduceRequests) / n
		setRecordsPerProduce(s)
	}
	return s, nil
}

// lines is an io.Writer for a process's output that calls on (when set)
// with each line written and keeps the last keep lines (0: all).
type lines struct {
	mu   sync.Mutex
	part []byte
	kept []string
	keep int
	on   func(string)
}

func (l *lines) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.part = append(l.part, b...)
	var done []string
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		done = append(done, string(l.part[:i]))
		l.part = l.part[i+1:]
	}
	l.kept = append(l.kept, done...)
	if l.keep > 0 && len(l.kept) > l.keep {
		l.kept = l.kept[len(l.kept)-l.keep:]
	}
	l.mu.Unlock()
	if l.on != nil {
		for _, line := range done {
			l.on(line)
		}
	}
	return len(b), nil
}

// text is what was kept, the unfinished last line included.
func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(append(slices.Clone(l.kept), string(l.part)), "\n")
}

// tail is the last lines kept, on one line, for an error message.
func (l *lines) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := append(slices.Clone(l.kept[max(0, len(l.kept)-5):]), string(l.part))
	return strings.Join(last, " | ")
}

// directNote shows the direct producer's CPU as the table's CPU and says
// what ran.
func directNote(row *labresult.Row) {
	if c := row.Get(producerCPU); c != nil {
		row.CPUAvg = labresult.F(*c)
	}
	row.AddNote("franz-go straight to Kafka from a process of its own at 1 CPU (hlab databus-checker --direct): one client per stream, no linger, acks=all, as the gateway's own producer; batches of 100, 16 in flight, %d-byte values; %.1f µs of CPU per message (%.2f cores); delivery not verified by consumers here",
		recordBytes, row.Value(producerCPUPerMsg), row.Value(producerCPU))
}

// checkerCPUNote says what the checker (the lab's process) spent beside
// the gateway.
func checkerCPUNote(row *labresult.Row) {
	c := row.Get(checkerCPU)
	if c == nil || row.RPS == nil || *row.RPS <= 0 {
		return
	}
	row.AddNote("the checker (the lab's process) spent %.2f cores beside it, %.1f µs per message", *c, *c / *row.RPS * 1e6)
}

// perfTestRow runs Kafka's producer benchmark, as
// kafka-producer-perf-test.sh does (java -cp <kafka-tools jars>
// ProducerPerformance, with kafka-run-class.sh's JVM options), at 1 CPU
// against the real broker; first a 1,000-record run, whose CPU is the
// JVM's start and connection, then the measured one. The CPU is the
// kernel's count for the JVM at its exit: startup included, and said.
func (b *bench) perfTestRow(ctx context.Context) (*labresult.Row, error) {
	b.run.Progress.Step(perfLabel, 30*time.Second)
	lib, err := deps.FetchKafkaTools(ctx, "", nil)
	if err != nil {
		return nil, fmt.Errorf("databus: Kafka's tools for the perf test: %w", err)
	}
	java, _, err := deps.FindJava()
	if err != nil {
		return nil, err
	}
	startup, _, _, err := b.perfTest(ctx, java, lib, 1000)
	if err != nil {
		return nil, err
	}
	cpu, wall, res, err := b.perfTest(ctx, java, lib, perfRecords(b.run.Opts))
	if err != nil {
		return nil, err
	}
	row := lab.NewRow(costPerfTest)
	row.Runs, row.Model, row.Connections, row.Requests = 1, "closed", 1, res.Records
	row.RPS, row.MeanMS, row.P50MS, row.P95MS = labresult.F(res.RecordsPerSec), labresult.F(res.AvgMS), labresult.F(res.P50MS), labresult.F(res.P95MS)
	row.P99MS, row.P999MS, row.MaxMS = labresult.F(res.P99MS), labresult.F(res.P999MS), labresult.F(res.MaxMS)
	row.CPUAvg = labresult.F(cpu.Seconds() / wall.Seconds())
	row.Set(recordsPerCPU, float64(res.Records)/cpu.Seconds())
	row.Set(perfCPU, cpu.Seconds())
	row.Set(perfStartupCPU, startup.Seconds())
	row.Set(recordsPerCPURunning, float64(res.Records)/max(cpu-startup, time.Millisecond).Seconds())
	row.AddNote("%s records, %.1f MB/s; the JVM used %.2f CPU-s in all (%s records per CPU-second), %.2f of them to start and connect (a 1,000-record run): %s records per CPU-second without them",
		thousands(int(res.Records)), res.MBPerSec, cpu.Seconds(), thousands(int(row.Value(recordsPerCPU))), startup.Seconds(), thousands(int(row.Value(recordsPerCPURunning))))
	return row, nil
}

// perfTest runs ProducerPerformance for n records and returns the JVM's
// CPU time, its wall time from start to exit and its summary.
func (b *bench) perfTest(ctx context.Context, java, lib string, n int) (cpu, wall time.Duration, res perfResult, err error) {
	run, k := b.run, b.k
	tp := k.Topic(fmt.Sprintf("lab-perf-test-%d-%d", time.Now().UnixNano(), n))
	if err := k.CreateTopic(ctx, tp, partitions); err != nil {
		return 0, 0, res, err
	}
	defer k.DeleteTopic(context.WithoutCancel(ctx), tp)
	args := []string{
		// kafka-run-class.sh's defaults (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
		"-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		"-cp", filepath.Join(lib, "*"), deps.ProducerPerfClass,
		"--topic", tp, "--num-records", strconv.Itoa(n), "--record-size", strconv.Itoa(recordBytes), "--throughput", "-1",
		"--producer-props", "bootstrap.servers=" + strings.Join(k.Brokers, ","), "acks=all",
	}
	var out lines
	start := time.Now()
	proc, err := run.Sandbox.Start(ctx, sandbox.Spec{Name: "producer-perf-test", Path: java, Args: args,
		CPU: gatewayCPU, MemoryMB: clientMemMB, Stdout: &out, Stderr: &out})
	if err != nil {
		return 0, 0, res, fmt.Errorf("databus: start kafka-producer-perf-test: %w", err)
	}
	select {
	case <-proc.Done():
	case <-ctx.Done():
	}
	wall = time.Since(start)
	proc.Stop(5 * time.Second)
	if err := ctx.Err(); err != nil {
		return 0, 0, res, err
	}
	cpu, ok := proc.CPUTime()
	res, err = parsePerfSummary(out.text())
	if err == nil && !ok {
		err = fmt.Errorf("databus: the kernel gave no CPU time for kafka-producer-perf-test")
	}
	if err == nil && proc.ExitErr() != nil {
		err = fmt.Errorf("databus: kafka-producer-perf-test: %w", proc.ExitErr())
	}
	return cpu, wall, res, err
}

// perfResult is the summary line of kafka-producer-perf-test.
type perfResult struct {
	Records                                   int64
	RecordsPerSec, MBPerSec                   float64
	AvgMS, MaxMS, P50MS, P95MS, P99MS, P999MS float64
}

// perfSummary is ProducerPerformance's final line ("1000000 records sent,
// 180375.180375 records/sec (17.20 MB/sec), 103.55 ms avg latency, 366.00
// ms max latency, 95 ms 50th, 183 ms 95th, 236 ms 99th, 353 ms 99.9th.");
// the lines every 5 s before it have no percentiles.
var perfSummary = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th`)

// parsePerfSummary reads the summary line of the perf test's output.
func parsePerfSummary(out string) (perfResult, error) {
	var m []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if mm := perfSummary.FindStringSubmatch(sc.Text()); mm != nil {
			m = mm
		}
	}
	if m == nil {
		tail := out
		if len(tail) > 400 {
			tail = "..." + tail[len(tail)-400:]
		}
		return perfResult{}, fmt.Errorf("databus: kafka-producer-perf-test printed no summary line (\"N records sent, R records/sec ..., P ms 99.9th.\"): is the broker up, and the kafka-tools jars whole (delete the cache's kafka-tools directory to fetch them again)? It said: %q", tail)
	}
	f := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
	n, _ := strconv.ParseInt(m[1], 10, 64)
	r := perfResult{Records: n, RecordsPerSec: f(2), MBPerSec: f(3), AvgMS: f(4), MaxMS: f(5), P50MS: f(6), P95MS: f(7), P99MS: f(8), P999MS: f(9)}
	if r.Records <= 0 || r.RecordsPerSec <= 0 {
		return r, fmt.Errorf("databus: kafka-producer-perf-test sent %d records at %.0f/s: nothing to compare", r.Records, r.RecordsPerSec)
	}
	return r, nil
}
