package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what Run measured. It is a value for the caller to read; Run
// does not touch it after returning.
type Result struct {
	Model       string // "closed" or "open"
	URL         string
	Method      string
	Connections int
	Rate        float64 // intended requests per second; 0 in the closed model

	// Duration is measured, from the first (intended) send to the last
	// completion, so requests allowed to finish after the configured
	// duration are inside it.
	Duration     time.Duration
	Requests     int64   // finished: answered or failed
	Successes    int64   // no transport error and status 200-399
	RPS          float64 // Requests per second of Duration
	Throughput   float64 // Successes per second of Duration
	SuccessRatio float64 // Successes / Requests; 0 when nothing finished

	// StatusCodes counts answers by HTTP status; Errors counts requests
	// without an answer by kind (the Kind* constants). Never nil.
	StatusCodes map[int]int64
	Errors      map[string]int64

	// Bytes read and written on the wire (headers included, TLS records
	// when https).
	BytesIn, BytesOut int64

	// Latency covers every finished request, failed ones included (a timed
	// out request counts with its timeout). In the open model it runs from
	// each request's intended send time, so the time a request waited for
	// a free connection or for the generator's CPU is in it;
	// LatencyUncorrected runs from the actual send time, as a closed-model
	// tool would measure, and hides that wait. In the closed model they are
	// equal.
	Latency, LatencyUncorrected Latencies

	// Missed says how well the open model kept its schedule.
	Missed Missed

	// Interrupted is set when ctx was done before the run's own end.
	Interrupted bool

	// Generator is the CPU the generating process used during the run and
	// the CPUs it had: when it used nearly all of them, the figures may
	// show the generator's limit rather than the target's.
	Generator Generator

	corrected, uncorrected *hdrhistogram.Histogram
}

// Latencies summarises a latency distribution. Percentiles come from an HDR
// histogram with microsecond resolution and 3 significant digits; Mean and
// Max are exact.
type Latencies struct {
	Mean, P50, P90, P95, P99, P999, Max time.Duration
}

// Missed counts the open model's failures to send on time. Latency is still
// measured from the intended send times; these say why it may be high.
type Missed struct {
	// Late counts sends that went out more than 10 ms after their
	// intended time.
	Late int64
	// Unsent counts intended sends whose time came before sending ended
	// but that never went out.
	Unsent int64
	// MaxLag is the longest delay between an intended and an actual send.
	MaxLag time.Duration
}

// Generator is the load generator's own CPU use over a run. It is the
// whole process's CPU time (user and system, all threads), so in a process
// that does other work at the same time, or runs several Runs at once, it
// covers that work too.
type Generator struct {
	// CPU is the CPUs the process used on average over the run: its CPU
	// time divided by the run's wall time (0.97 = 97% of one CPU).
	CPU float64
	// CPUsAvailable is the CPUs the process could use: the least of its
	// cgroup's CPU quota, its CPU affinity mask and the machine's CPUs.
	CPUsAvailable float64
	// Saturated is set when CPU exceeded 90% of CPUsAvailable: the
	// generator may have been the bottleneck. In the closed model it then
	// sent less than the target could serve, and in the open model its
	// sends may have gone out late (see Missed).
	Saturated bool
}

// PercentilePoint is one point of a latency-by-percentile curve.
type PercentilePoint struct {
	Percentile  float64       // 0..100
	Latency     time.Duration // from intended send time
	Uncorrected time.Duration // from actual send time
}

// chartPercentiles are the points Percentiles returns.
var chartPercentiles = []float64{50, 75, 90, 95, 99, 99.9, 99.99, 99.999, 100}

// Percentile returns the latency below which q percent (0..100) of the
// requests finished, measured from intended send times. It returns 0 when
// nothing finished.
func (r *Result) Percentile(q float64) time.Duration {
	return clampTo(percentile(r.corrected, q), r.Latency.Max)
}

// PercentileUncorrected is Percentile measured from actual send times.
func (r *Result) PercentileUncorrected(q float64) time.Duration {
	return clampTo(percentile(r.uncorrected, q), r.LatencyUncorrected.Max)
}

// clampTo keeps a histogram value, the top of its bucket, from exceeding
// the exact maximum.
func clampTo(d, maxLat time.Duration) time.Duration {
	if maxLat > 0 {
		return min(d, maxLat)
	}
	return d
}

// Percentiles returns the latency curve at 50, 75, 90, 95, 99, 99.9, 99.99,
// 99.999 and 100 percent, for charts.
func (r *Result) Percentiles() []PercentilePoint {
	pts := make([]PercentilePoint, len(chartPercentiles))
	for i, q := range chartPercentiles {
		pts[i] = PercentilePoint{Percentile: q, Latency: r.Percentile(q), Uncorrected: r.PercentileUncorrected(q)}
	}
	return pts
}

func percentile(h *hdrhistogram.Histogram, q float64) time.Duration {
	if h == nil || h.TotalCount() == 0 {
		return 0
	}
	return time.Duration(h.ValueAtQuantile(q)) * time.Microsecond
}

func latencies(h *hdrhistogram.Histogram, sum, maxLat time.Duration) Latencies {
	if h == nil || h.TotalCount() == 0 {
		return Latencies{}
	}
	return Latencies{
		Mean: sum / time.Duration(h.TotalCount()),
		P50:  clampTo(percentile(h, 50), maxLat),
		P90:  clampTo(percentile(h, 90), maxLat),
		P95:  clampTo(percentile(h, 95), maxLat),
		P99:  clampTo(percentile(h, 99), maxLat),
		P999: clampTo(percentile(h, 99.9), maxLat),
		Max:  maxLat,
	}
}

type latencyJSON struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

type missedJSON struct {
	Late     int64   `json:"late"`
	Unsent   int64   `json:"unsent"`
	MaxLagMs float64 `json:"max_lag_ms"`
}

type percentileJSON struct {
	Percentile    float64 `json:"percentile"`
	Ms            float64 `json:"ms"`
	UncorrectedMs float64 `json:"uncorrected_ms"`
}

// resultJSON is the "hlab load --json" contract (DESIGN.md) plus extras.
type resultJSON struct {
	Model                string           `json:"model"`
	URL                  string           `json:"url"`
	Method               string           `json:"method"`
	Connections          int              `json:"connections"`
	Rate                 float64          `json:"rate"`
	DurationS            float64          `json:"duration_s"`
	Requests             int64            `json:"requests"`
	Successes            int64            `json:"successes"`
	RPS                  float64          `json:"rps"`
	Throughput           float64          `json:"throughput"`
	SuccessRatio         float64          `json:"success_ratio"`
	StatusCodes          map[string]int64 `json:"status_codes"`
	Errors               map[string]int64 `json:"errors"`
	BytesIn              int64            `json:"bytes_in"`
	BytesOut             int64            `json:"bytes_out"`
	LatencyMs            latencyJSON      `json:"latency_ms"`
	LatencyUncorrectedMs latencyJSON      `json:"latency_uncorrected_ms"`
	Missed               missedJSON       `json:"missed"`
	Percentiles          []percentileJSON `json:"percentiles"`
	Interrupted          bool             `json:"interrupted"`
	GeneratorCPU         float64          `json:"generator_cpu"`
	GeneratorCPUs        float64          `json:"generator_cpus_available"`
	GeneratorSaturated   bool             `json:"generator_saturated"`
}

// ms converts to milliseconds, keeping microsecond precision.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}

// round3 keeps three decimals, enough for rates and ratios.
func round3(f float64) float64 {
	return math.Round(f*1e3) / 1e3
}

func latencyMs(l Latencies) latencyJSON {
	return latencyJSON{
		Mean: ms(l.Mean), P50: ms(l.P50), P90: ms(l.P90), P95: ms(l.P95),
		P99: ms(l.P99), P999: ms(l.P999), Max: ms(l.Max),
	}
}

// MarshalJSON encodes r as the "hlab load --json" object: durations in
// milliseconds as numbers (duration_s in seconds), status_codes keyed by the
// code as a string, and empty maps as {}.
func (r *Result) MarshalJSON() ([]byte, error) {
	j := resultJSON{
		Model:                r.Model,
		URL:                  r.URL,
		Method:               r.Method,
		Connections:          r.Connections,
		Rate:                 round3(r.Rate),
		DurationS:            round3(r.Duration.Seconds()*1e3) / 1e3,
		Requests:             r.Requests,
		Successes:            r.Successes,
		RPS:                  round3(r.RPS),
		Throughput:           round3(r.Throughput),
		SuccessRatio:         round3(r.SuccessRatio*1e3) / 1e3,
		StatusCodes:          make(map[string]int64, len(r.StatusCodes)),
		Errors:               make(map[string]int64, len(r.Errors)),
		BytesIn:              r.BytesIn,
		BytesOut:             r.BytesOut,
		LatencyMs:            latencyMs(r.Latency),
		LatencyUncorrectedMs: latencyMs(r.LatencyUncorrected),
		Missed:               missedJSON{Late: r.Missed.Late, Unsent: r.Missed.Unsent, MaxLagMs: ms(r.Missed.MaxLag)},
		Percentiles:          []percentileJSON{},
		Interrupted:          r.Interrupted,
		GeneratorCPU:         round3(r.Generator.CPU),
		GeneratorCPUs:        round3(r.Generator.CPUsAvailable),
		GeneratorSaturated:   r.Generator.Saturated,
	}
	for code, n := range r.StatusCodes {
		j.StatusCodes[strconv.Itoa(code)] = n
	}
	for kind, n := range r.Errors {
		j.Errors[kind] = n
	}
	if r.corrected != nil && r.corrected.TotalCount() > 0 {
		for _, p := range r.Percentiles() {
			j.Percentiles = append(j.Percentiles, percentileJSON{p.Percentile, ms(p.Latency), ms(p.Uncorrected)})
		}
	}
	return json.Marshal(j)
}

// WriteSummary writes a human-readable report of r, like wrk's or vegeta's.
// In the open model it shows the uncorrected latency beside the corrected
// one, and a WARNING when the generator failed to send on schedule.
func (r *Result) WriteSummary(w io.Writer) error {
	var b strings.Builder
	switch r.Model {
	case "open":
		fmt.Fprintf(&b, "%s %s: open model, %s req/s intended, up to %d connections\n",
			r.Method, r.URL, formatFloat(r.Rate), r.Connections)
	default:
		fmt.Fprintf(&b, "%s %s: closed model, %d connections\n", r.Method, r.URL, r.Connections)
	}
	if r.Interrupted {
		b.WriteString("Interrupted before the end; figures cover the part that ran.\n")
	}

	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  Requests\t%d in %s\n", r.Requests, r.Duration.Round(time.Millisecond))
	fmt.Fprintf(tw, "  Requests/sec\t%.2f\n", r.RPS)
	fmt.Fprintf(tw, "  Throughput\t%.2f successes/sec\n", r.Throughput)
	fmt.Fprintf(tw, "  Success ratio\t%.2f%% (%d of %d)\n", 100*r.SuccessRatio, r.Successes, r.Requests)
	fmt.Fprintf(tw, "  Transfer\t%s in, %s out\n", formatBytes(r.BytesIn), formatBytes(r.BytesOut))
	if err := tw.Flush(); err != nil {
		return err
	}

	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 8, 2, ' ', tabwriter.AlignRight)
	rows := []struct {
		name   string
		c, unc time.Duration
	}{
		{"mean", r.Latency.Mean, r.LatencyUncorrected.Mean},
		{"p50", r.Latency.P50, r.LatencyUncorrected.P50},
		{"p90", r.Latency.P90, r.LatencyUncorrected.P90},
		{"p95", r.Latency.P95, r.LatencyUncorrected.P95},
		{"p99", r.Latency.P99, r.LatencyUncorrected.P99},
		{"p99.9", r.Latency.P999, r.LatencyUncorrected.P999},
		{"max", r.Latency.Max, r.LatencyUncorrected.Max},
	}
	b.WriteString("  Latency\n")
	if r.Model == "open" {
		fmt.Fprintf(tw, "\tfrom intended send\tfrom actual send\t\n")
		for _, row := range rows {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t\n", row.name, formatLatency(row.c), formatLatency(row.unc))
		}
	} else {
		for _, row := range rows {
			fmt.Fprintf(tw, "    %s\t%s\t\n", row.name, formatLatency(row.c))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	b.WriteString("\n  Status codes: ")
	b.WriteString(formatCounts(r.StatusCodes, strconv.Itoa))
	b.WriteString("\n  Errors:       ")
	b.WriteString(formatCounts(r.Errors, func(s string) string { return s }))
	b.WriteString("\n")

	if m := r.Missed; m.Late > 0 || m.Unsent > 0 {
		fmt.Fprintf(&b, "\nWARNING: the generator fell behind its schedule: %d sends went out more than %s late"+
			" (max lag %s) and %d intended sends were never sent. Its connections were all busy or it lacked CPU."+
			" Latency is still measured from the intended send times.\n",
			m.Late, lateThreshold, formatLatency(m.MaxLag), m.Unsent)
	}
	if g := r.Generator; g.Saturated {
		fmt.Fprintf(&b, "\nWARNING: the generator may be the bottleneck: it used %.2f of its %s CPUs."+
			" The target may be able to do more than these figures show; give the generator more CPU"+
			" (or run it on another machine) to find out.\n", g.CPU, formatFloat(round3(g.CPUsAvailable)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatCounts[K int | string](m map[K]int64, key func(K) string) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", key(k), m[k])
	}
	return strings.Join(parts, ", ")
}

func formatLatency(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	}
}

func formatFloat(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, suffixes := float64(n)/unit, "KMGTPE"
	i := 0
	for f >= unit && i < len(suffixes)-1 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, suffixes[i])
}
