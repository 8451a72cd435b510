package labresult

import "fmt"

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
	// Key identifies the row within its experiment; Label is how it reads.
	Key   Key    `json:"key"`
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
	// Figures are the experiment's own figures for this row (counter
	// increases over the runs, a driver's figures, ratios derived from
	// them), each declared as a Metric in the experiment's Spec; set them
	// with Set, read them with Get or Figure.
	Figures map[string]float64 `json:"figures,omitempty"`

	// Integrity (see IntegrityFailures). Lost counts acknowledged
	// messages or writes that were not delivered, where the row verifies
	// delivery (nil: not verified). SuccessBound is the share of requests
	// the row must answer successfully (DefaultSuccessBound unless the
	// experiment states the row's own, for a baseline that fails by
	// design; FailsByDesign for a row none of whose requests can
	// succeed). Died names a service that died during the row; QuotaMissing
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

	// PerRun keeps each measured run's figures: claims pair the runs of
	// rows measured in rounds (Round > 0), targets read their spread.
	PerRun []RunValues `json:"per_run,omitempty"`
}

// RunValues are one run's figures, by the names Row.Figure knows. Round
// is the round of a Paired set the run belongs to (from 1), or 0 for a
// row measured on its own: claims pair runs of the same round only.
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

// IntegrityFailures lists why the row is not evidence: data lost or left
// differing, too few requests answered, a service died, no CPU quota.
// Empty when none.
func (r *Row) IntegrityFailures() []string {
	var out []string
	if r.Lost != nil && *r.Lost > 0 {
		out = append(out, fmt.Sprintf("lost %d acknowledged messages or writes", *r.Lost))
	}
	if r.RowsDiffering != nil && *r.RowsDiffering > 0 {
		out = append(out, fmt.Sprintf("left %d rows differing from the database", *r.RowsDiffering))
	}
	if r.Acked != nil && r.Stored != nil && *r.Acked != *r.Stored {
		out = append(out, fmt.Sprintf("acknowledged %d writes but stored %d", *r.Acked, *r.Stored))
	}
	if r.SuccessRatio != nil && *r.SuccessRatio < r.successBound() {
		out = append(out, fmt.Sprintf("answered %.2f%% of requests successfully, below its bound of %.2f%%", *r.SuccessRatio*100, r.successBound()*100))
	}
	if r.Died != "" {
		out = append(out, "had a service die: "+r.Died)
	}
	if r.QuotaMissing != "" {
		out = append(out, "ran without its CPU quota: "+r.QuotaMissing)
	}
	return out
}

// DefaultSuccessBound is the share of requests a row must answer
// successfully unless it states its own bound (lab.Measurement.MinSuccess).
const DefaultSuccessBound = 0.99

// FailsByDesign is the SuccessBound of a row whose every request fails by
// design: a fault row against a dependency that never answers, each
// request cut by a timeout. Its success ratio is shown and holds nothing;
// what such a row must show is judged by targets on its other figures
// (how soon the failure came).
const FailsByDesign = -1.0

func (r *Row) successBound() float64 {
	if r.SuccessBound != 0 {
		return r.SuccessBound
	}
	return DefaultSuccessBound
}

// AddNote appends a sentence to the row's note.
func (r *Row) AddNote(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if r.Note == "" {
		r.Note = s
		return
	}
	r.Note += "; " + s
}
