package databusexp

// The gateway's publish cost against producers that write to Kafka
// themselves (issue 15): a franz-go producer set up as the gateway's own
// per-stream producer (databus-checker --direct), measured in rounds
// with the gateway; and, with the real broker, Kafka's own producer
// benchmark (kafka-producer-perf-test.sh's ProducerPerformance). Each runs
// as a process of its own at 1 CPU, as the gateway does, and its CPU is
// the kernel's count for that process, not the load generator's.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
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
	"github.com/highload-lab/hlab/internal/sandbox"
)

// The target: the gateway spends at most 1.2x the CPU per message
// of a producer that writes to Kafka itself, judged on the ratio of
// runs measured back to back.
const (
	targetCostRatio = 1.2
	costRounds      = 3
	producerMemMB   = 1024
	recordBytes     = 100 // the checker's values, the perf test's records
)

var (
	costGatewayLabel = fmt.Sprintf("publish cost: gateway, %d throughput-optimized clients, aggregation off", pubClients)
	directLabel      = fmt.Sprintf("publish cost: direct franz-go producer, %d throughput-optimized clients (its own process, 1 CPU)", pubClients)
	perfLabel        = fmt.Sprintf("kafka-producer-perf-test (Kafka's own tool, 1 CPU): %d-byte records, acks=all", recordBytes)
)

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
	d := 2*o.Warmup() + costRounds*2*(pubRun+4*time.Second) // a direct run starts a process and its clients
	if o.Kafka == lab.KafkaReal {
		d += 40 * time.Second // two JVMs: a short run for their start, then the benchmark
	}
	return d
}

// publishCost measures the gateway's CPU per message against the direct
// producer's in rounds, then, with the real broker, Kafka's perf test,
// and adds the rows and the target's notes. publish makes a gateway
// measurement on a fresh topic; topic names a fresh topic.
func publishCost(ctx context.Context, run *lab.Run, k *lab.Kafka, publish func(string, checker.Config) lab.Measurement, topic func() string, d time.Duration) error {
	gwM := publish(costGatewayLabel, checker.Config{Scenario: checker.Throughput, Streams: pubClients})
	gwM.Driver = withOwnCPU{gwM.Driver}
	tp := topic()
	if err := k.CreateTopic(ctx, tp, partitions); err != nil {
		return err
	}
	directM := lab.Measurement{Label: directLabel, Duration: d, Steady: k.JVM,
		Driver: &directProducer{run: run, brokers: k.Brokers, topic: tp}}
	rows, err := run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{gwM, directM}, MinRounds: costRounds, MaxRounds: costRounds})
	if err != nil {
		return err
	}
	gw, direct := rows[0], rows[1]
	gw.Note = joinNote(publishNote(gw), checkerCPUNote(gw))
	direct.Note = directNote(direct)
	run.AddRow(gw)
	run.AddRow(direct)
	costTarget(run, k, gw, direct)

	if run.Opts.Kafka != lab.KafkaReal {
		return nil
	}
	perf, err := perfTestRow(ctx, run, k)
	if err != nil {
		return err
	}
	run.AddRow(perf)
	perfTarget(run, gw, perf)
	return nil
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
	if err != nil || from.IsZero() || !to.After(from) {
		return s, err
	}
	if s.Figures == nil {
		s.Figures = map[string]float64{}
	}
	s.Figures["checker_cpu_cores"] = (cpuTo - cpuFrom) / to.Sub(from).Seconds()
	return s, nil
}

// directProducer runs "hlab databus-checker --direct" as a process of its
// own at 1 CPU for each run, and measures that process's CPU (its cgroup,
// or /proc without one) over the window the checker says it measured.
type directProducer struct {
	run     *lab.Run
	brokers []string
	topic   string
}

func (p *directProducer) Drive(ctx context.Context, d time.Duration, window func(bool)) (*lab.Sample, error) {
	args := []string{"databus-checker", "--direct", "--brokers", strings.Join(p.brokers, ","), "--topic", p.topic,
		"--partitions", strconv.Itoa(partitions), "--scenario", string(checker.Throughput), "--streams", strconv.Itoa(pubClients),
		"--size", strconv.Itoa(recordBytes), "--warmup", "500ms", "--duration", d.String(), "--json"}
	var (
		stdout lines
		meter  *sandbox.Meter
		usage  sandbox.Usage
		mu     sync.Mutex
		proc   *sandbox.Process
	)
	stderr := &lines{keep: 5, on: func(line string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case line == checker.WindowOpenLine && meter == nil && proc != nil:
			meter = proc.Measure()
			window(true)
		case line == checker.WindowClosedLine && meter != nil:
			usage = meter.Stop()
			window(false)
		}
	}}
	mu.Lock()
	proc, err := p.run.Sandbox.Start(ctx, sandbox.Spec{Name: "direct-producer", Path: p.run.Opts.Self, Args: args,
		CPU: gatewayCPU, MemoryMB: producerMemMB, Stdout: &stdout, Stderr: stderr})
	mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("databus: start the direct producer: %w", err)
	}
	select {
	case <-proc.Done():
	case <-ctx.Done():
	}
	proc.Stop(5 * time.Second) // drains its output
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var res checker.Result
	if err := json.Unmarshal([]byte(stdout.text()), &res); err != nil {
		return nil, fmt.Errorf("databus: the direct producer (hlab %s) gave no result (%v); it said: %s", strings.Join(args, " "), proc.ExitErr(), stderr.tail())
	}
	mu.Lock()
	defer mu.Unlock()
	if meter == nil {
		return nil, fmt.Errorf("databus: the direct producer never opened its measured window (%v); it said: %s", proc.ExitErr(), stderr.tail())
	}
	s := CheckerSample(&res)
	s.Figures["producer_cpu_cores"] = usage.CPUAvg
	if res.MsgsPerSec > 0 {
		s.Figures["producer_cpu_us_per_msg"] = usage.CPUAvg / res.MsgsPerSec * 1e6
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
func directNote(row *lab.Row) string {
	if c, ok := row.Figures["producer_cpu_cores"]; ok {
		row.CPUAvg = lab.F(c)
	}
	return fmt.Sprintf("franz-go straight to Kafka from a process of its own at 1 CPU (hlab databus-checker --direct): one client per stream, no linger, acks=all, as the gateway's own producer; batches of 100, 16 in flight, %d-byte values; %.1f µs of CPU per message (%.2f cores); delivery not verified by consumers here",
		recordBytes, row.Figures["producer_cpu_us_per_msg"], row.Figures["producer_cpu_cores"])
}

// checkerCPUNote says what the checker (the lab's process) spent beside
// the gateway.
func checkerCPUNote(row *lab.Row) string {
	c, ok := row.Figures["checker_cpu_cores"]
	if !ok || row.RPS == nil || *row.RPS <= 0 {
		return ""
	}
	return fmt.Sprintf("the checker (the lab's process) spent %.2f cores beside it, %.1f µs per message", c, c / *row.RPS * 1e6)
}

// perRound pairs the runs of two rows measured in the same rounds and
// returns, by round, num's figure over den's.
func perRound(num, den *lab.Row, numFig, denFig func(map[string]float64) (float64, bool)) []float64 {
	var out []float64
	for _, a := range num.PerRun {
		for _, b := range den.PerRun {
			if a.Round != b.Round {
				continue
			}
			x, okx := numFig(a.Values)
			y, oky := denFig(b.Values)
			if okx && oky && y > 0 {
				out = append(out, x/y)
			}
		}
	}
	return out
}

// gatewayUsPerMsg is a gateway run's CPU per message, from its cgroup.
func gatewayUsPerMsg(v map[string]float64) (float64, bool) {
	cpu, rps := v["cpu_avg"], v["rps"]
	return cpu / rps * 1e6, cpu > 0 && rps > 0
}

func directUsPerMsg(v map[string]float64) (float64, bool) {
	us, ok := v["producer_cpu_us_per_msg"]
	return us, ok && us > 0
}

// runFigures returns a figure of each run of row.
func runFigures(row *lab.Row, fig func(map[string]float64) (float64, bool)) []float64 {
	var out []float64
	for _, r := range row.PerRun {
		if v, ok := fig(r.Values); ok {
			out = append(out, v)
		}
	}
	return out
}

// spread formats the median of vs with its range.
func spread(vs []float64, f func(float64) string) string {
	if len(vs) == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%s (%s-%s, %d runs)", f(lab.Median(vs)), f(slices.Min(vs)), f(slices.Max(vs)), len(vs))
}

// whole and hundredths format figures for spread.
func whole(v float64) string      { return thousands(int(math.Round(v))) }
func hundredths(v float64) string { return fmt.Sprintf("%.2f", v) }

// costTarget notes the gateway's CPU per message against the direct
// producer's: the ratio of each round's pair, their median and range.
func costTarget(run *lab.Run, k *lab.Kafka, gw, direct *lab.Row) {
	kafka := "kfake"
	if k.JVM {
		kafka = "the real broker"
	}
	head := fmt.Sprintf("target: the gateway's CPU per message <= %.1fx a direct franz-go producer's (%d throughput-optimized clients, aggregation off, each at 1 CPU, %s, runs alternating)",
		targetCostRatio, pubClients, kafka)
	ratios := perRound(gw, direct, gatewayUsPerMsg, directUsPerMsg)
	if len(ratios) == 0 {
		run.Note("%s: not measured (a row has no CPU figure: no quota mechanism, or a run failed)", head)
		return
	}
	r := lab.Median(ratios)
	gw.Figures["cpu_ratio_to_direct"] = r
	run.Note("%s: gateway %s µs/msg, direct %s µs/msg; ratio %s, %.2fx the target, %s", head,
		spread(runFigures(gw, gatewayUsPerMsg), hundredths), spread(runFigures(direct, directUsPerMsg), hundredths),
		spread(ratios, hundredths), r/targetCostRatio, verdict(r <= targetCostRatio))
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// perfTestRow runs Kafka's producer benchmark, as
// kafka-producer-perf-test.sh does (java -cp <kafka-tools jars>
// ProducerPerformance, with kafka-run-class.sh's JVM options), at 1 CPU
// against the real broker; first a 1,000-record run, whose CPU is the
// JVM's start and connection, then the measured one. The CPU is the
// kernel's count for the JVM at its exit: startup included, and said.
func perfTestRow(ctx context.Context, run *lab.Run, k *lab.Kafka) (*lab.Row, error) {
	run.Progress.Step(perfLabel, 30*time.Second)
	lib, err := deps.FetchKafkaTools(ctx, "", nil)
	if err != nil {
		return nil, fmt.Errorf("databus: Kafka's tools for the perf test: %w", err)
	}
	java, _, err := deps.FindJava()
	if err != nil {
		return nil, err
	}
	startup, _, _, err := perfTest(ctx, run, k, java, lib, 1000)
	if err != nil {
		return nil, err
	}
	n := perfRecords(run.Opts)
	cpu, wall, res, err := perfTest(ctx, run, k, java, lib, n)
	if err != nil {
		return nil, err
	}
	row := &lab.Row{Label: perfLabel, Runs: 1, Model: "closed", Connections: 1, Requests: res.Records,
		Errors: map[string]int64{}, StatusCodes: map[string]int64{},
		RPS: lab.F(res.RecordsPerSec), MeanMS: lab.F(res.AvgMS), P50MS: lab.F(res.P50MS), P95MS: lab.F(res.P95MS),
		P99MS: lab.F(res.P99MS), P999MS: lab.F(res.P999MS), MaxMS: lab.F(res.MaxMS), CPUAvg: lab.F(cpu.Seconds() / wall.Seconds()),
		Figures: map[string]float64{
			"records_per_cpu_s":         float64(res.Records) / cpu.Seconds(),
			"cpu_s":                     cpu.Seconds(),
			"startup_cpu_s":             startup.Seconds(),
			"records_per_cpu_s_running": float64(res.Records) / max(cpu-startup, time.Millisecond).Seconds(),
		}}
	row.Note = fmt.Sprintf("%s records, %.1f MB/s; the JVM used %.2f CPU-s in all (%s records per CPU-second), %.2f of them to start and connect (a 1,000-record run): %s records per CPU-second without them",
		thousands(int(res.Records)), res.MBPerSec, cpu.Seconds(), thousands(int(row.Figures["records_per_cpu_s"])), startup.Seconds(), thousands(int(row.Figures["records_per_cpu_s_running"])))
	return row, nil
}

// perfTest runs ProducerPerformance for n records and returns the JVM's
// CPU time, its wall time from start to exit and its summary.
func perfTest(ctx context.Context, run *lab.Run, k *lab.Kafka, java, lib string, n int) (cpu, wall time.Duration, res perfResult, err error) {
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
		CPU: gatewayCPU, MemoryMB: producerMemMB, Stdout: &out, Stderr: &out})
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

// perfTarget notes messages per CPU-second of the producing side: the
// gateway's (and the gateway's with the checker's) against the perf
// test's JVM.
func perfTarget(run *lab.Run, gw, perf *lab.Row) {
	perfPerCPU := perf.Figures["records_per_cpu_s"]
	if gw.RPS == nil || gw.CPUAvg == nil || *gw.CPUAvg <= 0 || perfPerCPU <= 0 {
		run.Note("gateway against kafka-producer-perf-test: the gateway's CPU was not measured")
		return
	}
	gwPerCPU := *gw.RPS / *gw.CPUAvg
	gw.Figures["msgs_per_gateway_cpu_s"] = gwPerCPU
	both := "the checker's CPU was not measured"
	if c, ok := gw.Figures["checker_cpu_cores"]; ok {
		perBoth := *gw.RPS / (*gw.CPUAvg + c)
		both = fmt.Sprintf("gateway+checker %s msgs per CPU-second, %.2fx", thousands(int(perBoth)), perBoth/perfPerCPU)
	}
	run.Note("gateway against Kafka's own producer (kafka-producer-perf-test, %d-byte records, acks=all, each at 1 CPU, real broker): gateway %s msgs per gateway CPU-second (%s msgs/s), perf test %s records per JVM CPU-second (%s records/s, JVM start included; %s without it): %.2fx; %s",
		recordBytes, thousands(int(gwPerCPU)), thousands(int(*gw.RPS)), thousands(int(perfPerCPU)), thousands(int(*perf.RPS)),
		thousands(int(perf.Figures["records_per_cpu_s_running"])), gwPerCPU/perfPerCPU, both)
}
