package lab

import (
	"math"
	"slices"
)

// Result is what one experiment measured: the JSON contract's
// "experiments" entry.
type Result struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Claim, Ratio, Verdict and Reproduced mirror the first claim: the
	// report's own setup.
	Claim      string   `json:"claim"`
	Ratio      *float64 `json:"ratio"`
	Verdict    Verdict  `json:"verdict"`
	Reproduced bool     `json:"reproduced"`
	// Claims lists every claim's verdict, the first one's included.
	Claims []ClaimResult     `json:"claims"`
	Checks []Check           `json:"checks,omitempty"`
	Env    map[string]string `json:"env"`
	Rows   []*Row            `json:"rows"`
	Notes  []string          `json:"notes,omitempty"`
	// NotRerun lists the report's figures this run did not rerun, each
	// with its reason, so that nothing is skipped silently.
	NotRerun []NotRerun `json:"not_rerun,omitempty"`
	Error    string     `json:"error,omitempty"`
	Mode     Mode       `json:"mode"`
	Seconds  float64    `json:"seconds"`
}

// Check is something an experiment verifies that is not a claim of the
// report (it holds by construction, or the report states it as a fact):
// shown with the figures, never judged with an interval.
type Check struct {
	Text  string `json:"check"`
	Holds bool   `json:"holds"`
	// Detail gives the figures the check read.
	Detail string `json:"detail"`
}

// NotRerun is a figure of the report the experiment does not rerun here.
type NotRerun struct {
	Figure string `json:"figure"`
	Why    string `json:"why"`
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
	Label string `json:"label"`
	// RPS counts successful requests only (goodput): requests that fail
	// fast cannot raise it.
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

	// Integrity (see IntegrityFailures). Lost counts acknowledged
	// messages or writes that were not delivered, where the row verifies
	// delivery (nil: not verified). SuccessBound is the share of requests
	// the row must answer successfully (DefaultSuccessBound unless the
	// experiment states the row's own, for a baseline that fails by
	// design). Died names a service that died during the row; QuotaMissing
	// a service that ran without the CPU quota it asked for.
	Lost         *int64  `json:"lost,omitempty"`
	SuccessBound float64 `json:"success_bound"`
	// RowsDiffering and ConvergeS are a fault row's: the rows of a
	// replica that still differ from the database once it converged (must
	// be 0), and how long after the fault it converged.
	RowsDiffering *int64   `json:"rows_differing,omitempty"`
	ConvergeS     *float64 `json:"converge_s,omitempty"`
	Died          string   `json:"died,omitempty"`
	QuotaMissing  string   `json:"quota_missing,omitempty"`

	// Noise: the CPU that processes outside the lab used while the row
	// ran (cores; the largest over its runs), the 1-minute load average at
	// the end of its last run, and whether outside CPU exceeded
	// NoisyCPU in any run.
	OutsideCPU *float64 `json:"outside_cpu"`
	LoadAvg    *float64 `json:"load_avg"`
	Noisy      bool     `json:"noisy"`
	// GeneratorCPU is the most CPUs the load generator's process (the
	// lab) used on average in one of the row's runs, and
	// GeneratorCPUsAvailable the CPUs it had in that run; nil when the
	// driver does not measure it. GeneratorSaturated is set when in any run
	// it used more than 90% of what it had: the row may show the
	// generator's limit rather than the system's.
	GeneratorCPU           *float64 `json:"generator_cpu,omitempty"`
	GeneratorCPUsAvailable *float64 `json:"generator_cpus_available,omitempty"`
	GeneratorSaturated     bool     `json:"generator_saturated,omitempty"`
	// Placement says whether the row's processes had cores of their own
	// ("own cores") or shared the machine's ("shared"); see Plan.
	Placement string `json:"placement,omitempty"`

	// PerRun keeps each measured run's figures when the row was measured
	// in rounds with others (Paired): claims pair runs of one round.
	PerRun []RunValues `json:"per_run,omitempty"`
}

// RunValues are one run's figures, by the names Row.Figure knows.
type RunValues struct {
	Round      int                `json:"round"`
	Values     map[string]float64 `json:"values"`
	OutsideCPU float64            `json:"outside_cpu"`
	Noisy      bool               `json:"noisy,omitempty"`
}

// NoisyCPU is the outside CPU (cores) above which a run is marked noisy:
// a tenth of a core taken by something other than the lab.
const NoisyCPU = 0.1

// Percentile is one point of a latency distribution.
type Percentile struct {
	Q  float64 `json:"q"` // 50, 99, 99.9, 100
	MS float64 `json:"ms"`
}

// F returns a pointer to v, for optional figures.
func F(v float64) *float64 { return &v }

// runFigures is one measured run's figures.
type runFigures struct {
	sample *Sample
	cpu    float64
	rss    float64
	rssMx  float64
	thr    int64

	heap     *heapFigures       // nil when not sampled
	counters map[string]float64 // increases over the run, by Counter.Key

	outside float64  // cores used outside the lab during the run
	loadAvg *float64 // 1-minute load average at its end
	round   int      // the round of a Paired set, else 0
}

func (f runFigures) noisy() bool { return f.outside > NoisyCPU }

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }

// aggregate makes a row of measured runs: each figure is the median over
// runs, RPS (goodput) also with its min and max.
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
	row.RPS = med(func(r runFigures) float64 { return r.sample.Goodput() })
	if !slices.ContainsFunc(runs, func(r runFigures) bool { return r.sample.Requests == 0 }) {
		// Latency of nothing is not a figure.
		row.MeanMS = med(func(r runFigures) float64 { return ms(r.sample.Latency.Mean) })
		row.P50MS = med(func(r runFigures) float64 { return ms(r.sample.Latency.P50) })
		row.P90MS = med(func(r runFigures) float64 { return ms(r.sample.Latency.P90) })
		row.P95MS = med(func(r runFigures) float64 { return ms(r.sample.Latency.P95) })
		row.P99MS = med(func(r runFigures) float64 { return ms(r.sample.Latency.P99) })
		row.P999MS = med(func(r runFigures) float64 { return ms(r.sample.Latency.P999) })
		row.MaxMS = med(func(r runFigures) float64 { return ms(r.sample.Latency.Max) })
	}
	row.SuccessRatio = med(func(r runFigures) float64 { return r.sample.SuccessRatio() })
	row.CPUAvg = med(func(r runFigures) float64 { return r.cpu })
	row.RSSMBAvg = med(func(r runFigures) float64 { return r.rss })
	row.RSSMBMax = med(func(r runFigures) float64 { return r.rssMx })
	if !slices.ContainsFunc(runs, func(r runFigures) bool { return r.heap == nil }) {
		row.HeapMBAvg = med(func(r runFigures) float64 { return r.heap.heapAvg })
		row.HeapMBMax = med(func(r runFigures) float64 { return r.heap.heapMax })
		row.GoroutinesAvg = med(func(r runFigures) float64 { return r.heap.gorAvg })
		row.GoroutinesMax = med(func(r runFigures) float64 { return r.heap.gorMax })
	}
	// Counter increases and a driver's own figures: summed and medians.
	for _, r := range runs {
		for k, v := range r.counters {
			if row.Figures == nil {
				row.Figures = map[string]float64{}
			}
			row.Figures[k] += v
		}
	}
	driverFigs := map[string][]float64{}
	for _, r := range runs {
		for k, v := range r.sample.Figures {
			driverFigs[k] = append(driverFigs[k], v)
		}
	}
	for k, v := range driverFigs {
		if row.Figures == nil {
			row.Figures = map[string]float64{}
		}
		row.Figures[k] = median(v)
	}
	rps := make([]float64, len(runs))
	p99 := make([]float64, len(runs))
	for i, r := range runs {
		s := r.sample
		rps[i] = s.Goodput()
		p99[i] = ms(s.Latency.P99)
		row.Requests += s.Requests
		row.Late += s.Late
		row.Throttled += r.thr
		for k, v := range s.Errors {
			row.Errors[k] += v
		}
		for code, v := range s.StatusCodes {
			row.StatusCodes[code] += v
		}
		if s.Lost != nil {
			if row.Lost == nil {
				row.Lost = new(int64)
			}
			*row.Lost += *s.Lost
		}
		if row.OutsideCPU == nil || r.outside > *row.OutsideCPU {
			row.OutsideCPU = F(r.outside)
		}
		if r.loadAvg != nil {
			row.LoadAvg = F(*r.loadAvg)
		}
		row.Noisy = row.Noisy || r.noisy()
		if g := s.Generator; g.CPUsAvailable > 0 {
			if row.GeneratorCPU == nil || g.CPU > *row.GeneratorCPU {
				row.GeneratorCPU, row.GeneratorCPUsAvailable = F(g.CPU), F(g.CPUsAvailable)
			}
			row.GeneratorSaturated = row.GeneratorSaturated || g.Saturated
		}
	}
	row.RPSMin, row.RPSMax = F(slices.Min(rps)), F(slices.Max(rps))
	row.P99MSMin, row.P99MSMax = F(slices.Min(p99)), F(slices.Max(p99))
	// The chart shows the run whose goodput is the median.
	mid := runs[0]
	for _, r := range runs {
		if math.Abs(r.sample.Goodput()-*row.RPS) < math.Abs(mid.sample.Goodput()-*row.RPS) {
			mid = r
		}
	}
	row.Percentiles = mid.sample.Percentiles
	first := runs[0].sample
	row.Model, row.Connections, row.Rate = first.Model, first.Connections, first.Rate
	return row
}
