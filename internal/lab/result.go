package lab

import (
	"math"
	"slices"
	"strconv"

	"github.com/highload-lab/hlab/loadgen"
)

// Result is what one experiment measured: the JSON contract's
// "experiments" entry.
type Result struct {
	Name       string   `json:"name"`
	Title      string   `json:"title"`
	Claim      string   `json:"claim"`
	Ratio      *float64 `json:"ratio"`
	Reproduced bool     `json:"reproduced"`
	// Claims lists every verdict when there are several (the contract's
	// "claims"); Verdicts always holds them, for rendering.
	Claims   []ClaimResult     `json:"claims,omitempty"`
	Verdicts []ClaimResult     `json:"-"`
	Env      map[string]string `json:"env"`
	Rows     []*Row            `json:"rows"`
	Notes    []string          `json:"notes,omitempty"`
	Error    string            `json:"error,omitempty"`
	Mode     Mode              `json:"mode"`
	Seconds  float64           `json:"seconds"`
}

// Ref holds the reference report's figures for a row; nil fields are
// figures the report does not give.
type Ref struct {
	RPS    *float64 `json:"rps,omitempty"`
	MeanMS *float64 `json:"mean_ms,omitempty"`
	P50MS  *float64 `json:"p50_ms,omitempty"`
	P99MS  *float64 `json:"p99_ms,omitempty"`
	// Figures some reports give beyond the above.
	P95MS        *float64 `json:"p95_ms,omitempty"`
	MaxMS        *float64 `json:"max_ms,omitempty"`
	SuccessRatio *float64 `json:"success_ratio,omitempty"`
	HeapMBAvg    *float64 `json:"heap_mb_avg,omitempty"`
	HeapMBMax    *float64 `json:"heap_mb_max,omitempty"`
}

// Row is one setup's measurement: medians over Runs measured runs, with the
// spread of RPS. A nil figure was not measured; it is never invented.
type Row struct {
	Label        string   `json:"label"`
	RPS          *float64 `json:"rps"`
	MeanMS       *float64 `json:"mean_ms"`
	P50MS        *float64 `json:"p50_ms"`
	P90MS        *float64 `json:"p90_ms"`
	P95MS        *float64 `json:"p95_ms"`
	P99MS        *float64 `json:"p99_ms"`
	P999MS       *float64 `json:"p999_ms"`
	MaxMS        *float64 `json:"max_ms"`
	SuccessRatio *float64 `json:"success_ratio"`
	RSSMBAvg     *float64 `json:"rss_mb_avg"`
	RSSMBMax     *float64 `json:"rss_mb_max"`
	CPUAvg       *float64 `json:"cpu_avg"`
	Runs         int      `json:"runs"`
	RPSMin       *float64 `json:"rps_min"`
	RPSMax       *float64 `json:"rps_max"`
	P99MSMin     *float64 `json:"p99_ms_min"`
	P99MSMax     *float64 `json:"p99_ms_max"`
	Ref          *Ref     `json:"ref"`

	// Go heap in use and goroutines of the services named in
	// Measurement.Metrics, sampled every 100 ms (nil when not sampled).
	HeapMBAvg     *float64 `json:"heap_mb_avg"`
	HeapMBMax     *float64 `json:"heap_mb_max"`
	GoroutinesAvg *float64 `json:"goroutines_avg"`
	GoroutinesMax *float64 `json:"goroutines_max"`

	Model       string           `json:"model"` // closed or open
	Connections int              `json:"connections"`
	Rate        float64          `json:"rate,omitempty"` // open model: requests/s asked for
	Requests    int64            `json:"requests"`       // over all measured runs
	Errors      map[string]int64 `json:"errors"`         // by kind, over all runs
	StatusCodes map[string]int64 `json:"status_codes"`   // over all runs
	Late        int64            `json:"late_sends,omitempty"`
	Throttled   int64            `json:"cpu_throttled_periods,omitempty"`
	// Percentiles of the median run's latency, for charts.
	Percentiles []Percentile `json:"percentiles,omitempty"`
	Note        string       `json:"note,omitempty"`
	// Acked and Stored are, in experiments that write, the writes
	// acknowledged to the load generator (warm-up included) and the rows
	// the database holds after the row's runs; nil where not counted.
	Acked  *int64 `json:"acked,omitempty"`
	Stored *int64 `json:"stored,omitempty"`
	// Figures are an experiment's own figures for this row (counter
	// increases over the runs, ratios derived from them); Row.Figure and
	// so claims can use them by name.
	Figures map[string]float64 `json:"figures,omitempty"`
}

// Percentile is one point of a latency distribution.
type Percentile struct {
	Q  float64 `json:"q"` // 50, 99, 99.9, 100
	MS float64 `json:"ms"`
}

// F returns a pointer to v, for optional figures.
func F(v float64) *float64 { return &v }

// run is one measured run's figures.
type runFigures struct {
	res   *loadgen.Result
	cpu   float64
	rss   float64
	rssMx float64
	thr   int64

	heap     *heapFigures       // nil when not sampled
	counters map[string]float64 // increases over the run, by Counter.Key
}

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }

// aggregate makes a row of measured runs: each figure is the median over
// runs, RPS also with its min and max.
func aggregate(label string, runs []runFigures) *Row {
	row := &Row{Label: label, Runs: len(runs), Errors: map[string]int64{}, StatusCodes: map[string]int64{}}
	if len(runs) == 0 {
		return row
	}
	med := func(get func(runFigures) float64) *float64 {
		vals := make([]float64, len(runs))
		for i, r := range runs {
			vals[i] = get(r)
		}
		return F(median(vals))
	}
	row.RPS = med(func(r runFigures) float64 { return r.res.RPS })
	row.MeanMS = med(func(r runFigures) float64 { return ms(r.res.Latency.Mean) })
	row.P50MS = med(func(r runFigures) float64 { return ms(r.res.Latency.P50) })
	row.P90MS = med(func(r runFigures) float64 { return ms(r.res.Latency.P90) })
	row.P95MS = med(func(r runFigures) float64 { return ms(r.res.Latency.P95) })
	row.P99MS = med(func(r runFigures) float64 { return ms(r.res.Latency.P99) })
	row.P999MS = med(func(r runFigures) float64 { return ms(r.res.Latency.P999) })
	row.MaxMS = med(func(r runFigures) float64 { return ms(r.res.Latency.Max) })
	row.SuccessRatio = med(func(r runFigures) float64 { return r.res.SuccessRatio })
	row.CPUAvg = med(func(r runFigures) float64 { return r.cpu })
	row.RSSMBAvg = med(func(r runFigures) float64 { return r.rss })
	row.RSSMBMax = med(func(r runFigures) float64 { return r.rssMx })
	if !slices.ContainsFunc(runs, func(r runFigures) bool { return r.heap == nil }) {
		row.HeapMBAvg = med(func(r runFigures) float64 { return r.heap.heapAvg })
		row.HeapMBMax = med(func(r runFigures) float64 { return r.heap.heapMax })
		row.GoroutinesAvg = med(func(r runFigures) float64 { return r.heap.gorAvg })
		row.GoroutinesMax = med(func(r runFigures) float64 { return r.heap.gorMax })
	}
	for _, r := range runs {
		for k, v := range r.counters {
			if row.Figures == nil {
				row.Figures = map[string]float64{}
			}
			row.Figures[k] += v
		}
	}
	rps := make([]float64, len(runs))
	p99 := make([]float64, len(runs))
	for i, r := range runs {
		rps[i] = r.res.RPS
		p99[i] = ms(r.res.Latency.P99)
		row.Requests += r.res.Requests
		row.Late += r.res.Missed.Late
		row.Throttled += r.thr
		for k, v := range r.res.Errors {
			row.Errors[k] += v
		}
		for code, v := range r.res.StatusCodes {
			row.StatusCodes[strconv.Itoa(code)] += v
		}
	}
	row.RPSMin, row.RPSMax = F(slices.Min(rps)), F(slices.Max(rps))
	row.P99MSMin, row.P99MSMax = F(slices.Min(p99)), F(slices.Max(p99))
	// The chart shows the run whose RPS is the median.
	mid := runs[0]
	for _, r := range runs {
		if math.Abs(r.res.RPS-*row.RPS) < math.Abs(mid.res.RPS-*row.RPS) {
			mid = r
		}
	}
	for _, p := range mid.res.Percentiles() {
		row.Percentiles = append(row.Percentiles, Percentile{Q: p.Percentile, MS: ms(p.Latency)})
	}
	return row
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
