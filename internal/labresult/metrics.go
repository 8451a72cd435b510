package labresult

import "fmt"

// Better says which way a figure improves, for comparisons and charts.
type Better string

const (
	// Higher: more is better (throughput, success).
	Higher Better = "higher"
	// Lower: less is better (latency, memory, CPU at equal work, loss).
	Lower Better = "lower"
	// Neither: a count or setting that is read, not ranked.
	Neither Better = ""
)

// Metric is one figure a row can carry: its name, which is its JSON field
// (a standard figure) or its key in Row.Figures (an experiment's own), its
// unit, which way is better, and what it means.
//
// The standard figures, which every driver measures, are the table below
// (Standard). An experiment declares its own in its Spec; the runner
// refuses a row that carries a figure declared in neither, and a result
// lists the experiment's own (Result.Metrics), so that programs reading
// the JSON know every figure's unit and direction without the experiment.
type Metric struct {
	Name   string `json:"name"`
	Unit   string `json:"unit,omitempty"`
	Better Better `json:"better,omitempty"`
	Doc    string `json:"doc,omitempty"`
}

// standard is a standard figure with where a row keeps it.
type standard struct {
	Metric
	// Title names the figure in table columns and comparisons.
	title string
	read  func(*Row) *float64
	// perRun: each run's value is kept (Row.PerRun) and the row's is the
	// median over runs, so claims can pair runs on it and targets read
	// its spread.
	perRun bool
	// compared: "hlab lab compare" shows it for every row.
	compared bool
}

func count(n *int64) *float64 {
	if n == nil {
		return nil
	}
	return F(float64(*n))
}

func nonZero(n int64) *float64 {
	if n == 0 {
		return nil
	}
	return F(float64(n))
}

// The standard figures: the ones every driver measures, kept in Row's
// fields. Claims and targets name them by Name; experiments read them
// from rows with Get and Value.
var (
	RPS              = Metric{"rps", "req/s", Higher, "successful requests per second (goodput): failures cannot raise it"}
	MeanMS           = Metric{"mean_ms", "ms", Lower, "mean latency"}
	P50MS            = Metric{"p50_ms", "ms", Lower, "median latency"}
	P90MS            = Metric{"p90_ms", "ms", Lower, "90th percentile latency"}
	P95MS            = Metric{"p95_ms", "ms", Lower, "95th percentile latency"}
	P99MS            = Metric{"p99_ms", "ms", Lower, "99th percentile latency"}
	P999MS           = Metric{"p999_ms", "ms", Lower, "99.9th percentile latency"}
	MaxMS            = Metric{"max_ms", "ms", Lower, "slowest request"}
	SuccessRatio     = Metric{"success_ratio", "ratio", Higher, "share of requests answered successfully"}
	RSSMBAvg         = Metric{"rss_mb_avg", "MB", Lower, "resident memory of the row's processes, summed, averaged over the window"}
	RSSMBMax         = Metric{"rss_mb_max", "MB", Lower, "peak resident memory of the row's processes, summed"}
	CPUAvg           = Metric{"cpu_avg", "cores", Lower, "CPU of the row's processes, summed, averaged over the window"}
	HeapMBAvg        = Metric{"heap_mb_avg", "MB", Lower, "Go heap in use of the sampled services"}
	HeapMBMax        = Metric{"heap_mb_max", "MB", Lower, "peak Go heap in use of the sampled services"}
	GoroutinesAvg    = Metric{"goroutines_avg", "", Lower, "goroutines of the sampled services"}
	GoroutinesMax    = Metric{"goroutines_max", "", Lower, "peak goroutines of the sampled services"}
	Requests         = Metric{"requests", "", Neither, "requests finished over all measured runs"}
	LateSends        = Metric{"late_sends", "", Lower, "open model: sends more than 10 ms late, over all runs"}
	ThrottledPeriods = Metric{"cpu_throttled_periods", "", Lower, "CFS periods in which the quota throttled the row's processes"}
	Lost             = Metric{"lost", "", Lower, "acknowledged messages or writes not delivered (an integrity gate)"}
	RowsDiffering    = Metric{"rows_differing", "", Lower, "replica rows still differing from the database after a fault (an integrity gate)"}
	ConvergeS        = Metric{"converge_s", "s", Lower, "time from a fault to the replica matching the database"}
	Acked            = Metric{"acked", "", Neither, "writes acknowledged to the load generator"}
	Stored           = Metric{"stored", "", Neither, "rows the database holds after the row's runs"}
	GeneratorCPU     = Metric{"generator_cpu", "cores", Neither, "CPU the load generator used in its busiest run"}
	OutsideCPU       = Metric{"outside_cpu", "cores", Lower, "CPU used outside the lab during the row's noisiest run"}
)

// standards is the table of standard figures, in the order tables show
// them: where a row keeps each.
var standards = []standard{
	{RPS, "rps", func(r *Row) *float64 { return r.RPS }, true, true},
	{MeanMS, "mean ms", func(r *Row) *float64 { return r.MeanMS }, true, true},
	{P50MS, "p50 ms", func(r *Row) *float64 { return r.P50MS }, true, true},
	{P90MS, "p90 ms", func(r *Row) *float64 { return r.P90MS }, true, false},
	{P95MS, "p95 ms", func(r *Row) *float64 { return r.P95MS }, true, false},
	{P99MS, "p99 ms", func(r *Row) *float64 { return r.P99MS }, true, true},
	{P999MS, "p99.9 ms", func(r *Row) *float64 { return r.P999MS }, true, false},
	{MaxMS, "max ms", func(r *Row) *float64 { return r.MaxMS }, true, false},
	{SuccessRatio, "success ratio", func(r *Row) *float64 { return r.SuccessRatio }, true, true},
	{RSSMBAvg, "rss MB", func(r *Row) *float64 { return r.RSSMBAvg }, true, false},
	{RSSMBMax, "rss MB max", func(r *Row) *float64 { return r.RSSMBMax }, true, true},
	{CPUAvg, "cpu", func(r *Row) *float64 { return r.CPUAvg }, true, true},
	{HeapMBAvg, "heap MB avg", func(r *Row) *float64 { return r.HeapMBAvg }, true, true},
	{HeapMBMax, "heap MB max", func(r *Row) *float64 { return r.HeapMBMax }, true, false},
	{GoroutinesAvg, "goroutines", func(r *Row) *float64 { return r.GoroutinesAvg }, true, false},
	{GoroutinesMax, "goroutines max", func(r *Row) *float64 { return r.GoroutinesMax }, true, false},
	{Requests, "requests", func(r *Row) *float64 { return nonZero(r.Requests) }, false, false},
	{LateSends, "late sends", func(r *Row) *float64 { return nonZero(r.Late) }, false, false},
	{ThrottledPeriods, "throttled", func(r *Row) *float64 { return nonZero(r.Throttled) }, false, false},
	{Lost, "lost", func(r *Row) *float64 { return count(r.Lost) }, false, true},
	{RowsDiffering, "rows differing", func(r *Row) *float64 { return count(r.RowsDiffering) }, false, true},
	{ConvergeS, "converge s", func(r *Row) *float64 { return r.ConvergeS }, false, false},
	{Acked, "acked", func(r *Row) *float64 { return count(r.Acked) }, false, false},
	{Stored, "stored", func(r *Row) *float64 { return count(r.Stored) }, false, false},
	{GeneratorCPU, "generator cpu", func(r *Row) *float64 { return r.GeneratorCPU }, false, false},
	{OutsideCPU, "outside cpu", func(r *Row) *float64 { return r.OutsideCPU }, false, false},
}

var standardByName = func() map[string]*standard {
	m := map[string]*standard{}
	for i := range standards {
		m[standards[i].Name] = &standards[i]
	}
	return m
}()

// Standard returns the standard figures, in table order.
func Standard() []Metric {
	out := make([]Metric, len(standards))
	for i, s := range standards {
		out[i] = s.Metric
	}
	return out
}

// IsStandard reports whether name is a standard figure (a field of Row),
// which an experiment must not declare again nor set in Row.Figures.
func IsStandard(name string) bool { return standardByName[name] != nil }

// Compared returns the standard figures "hlab lab compare" shows for
// every row, in table order.
func Compared() []Metric {
	var out []Metric
	for _, s := range standards {
		if s.compared {
			out = append(out, s.Metric)
		}
	}
	return out
}

// Title is how tables name the figure: the standard figure's column
// title, or an experiment's figure by its name.
func Title(name string) string {
	if s := standardByName[name]; s != nil {
		return s.title
	}
	return name
}

// Figure returns the row's figure named name, a standard one or one of
// Figures; nil when not measured.
func (r *Row) Figure(name string) *float64 {
	if s := standardByName[name]; s != nil {
		return s.read(r)
	}
	if v, ok := r.Figures[name]; ok {
		return &v
	}
	return nil
}

// Get returns the row's figure m; nil when not measured.
func (r *Row) Get(m Metric) *float64 { return r.Figure(m.Name) }

// Value returns the row's figure m, 0 when not measured: for prose that
// shows a figure, never for a judgement (which reads Get's nil as "not
// measured").
func (r *Row) Value(m Metric) float64 {
	if v := r.Get(m); v != nil {
		return *v
	}
	return 0
}

// Set sets the experiment's own figure m on the row. Setting a standard
// figure this way is a programming error: those are the row's fields.
func (r *Row) Set(m Metric, v float64) {
	if IsStandard(m.Name) {
		panic(fmt.Sprintf("labresult: %q is a standard figure, a field of Row: set the field", m.Name))
	}
	if r.Figures == nil {
		r.Figures = map[string]float64{}
	}
	r.Figures[m.Name] = v
}

// Add adds v to the experiment's own figure m (a count over runs).
func (r *Row) Add(m Metric, v float64) { r.Set(m, r.Value(m)+v) }

// RunValues returns the figures a single run keeps for pairing
// (RunValues.Values): the per-run standard figures and the experiment's
// own.
func (r *Row) RunValues() map[string]float64 {
	out := map[string]float64{}
	for _, s := range standards {
		if !s.perRun {
			continue
		}
		if v := s.read(r); v != nil {
			out[s.Name] = *v
		}
	}
	for k, v := range r.Figures {
		out[k] = v
	}
	return out
}

// allFigures returns every figure the row has, by name.
func (r *Row) allFigures() map[string]float64 {
	out := map[string]float64{}
	for _, s := range standards {
		if v := s.read(r); v != nil {
			out[s.Name] = *v
		}
	}
	for k, v := range r.Figures {
		out[k] = v
	}
	return out
}

// Spread returns the range of figure name over the row's runs, when the
// row's figure is one of theirs: with runs kept (PerRun) and the row's
// value within their range (a median over runs, not a total), their min
// and max over at least two runs; else the stored min and max of rps and p99 over more than one
// run; else ok is false, and the row's value is all there is.
func (r *Row) Spread(name string) (lo, hi float64, ok bool) {
	v := r.Figure(name)
	if v == nil {
		return 0, 0, false
	}
	var vals []float64
	for _, run := range r.PerRun {
		if x, has := run.Values[name]; has {
			vals = append(vals, x)
		}
	}
	if len(vals) > 1 {
		lo, hi = vals[0], vals[0]
		for _, x := range vals[1:] {
			lo, hi = min(lo, x), max(hi, x)
		}
		if lo <= *v && *v <= hi {
			return lo, hi, true
		}
		return 0, 0, false
	}
	if r.Runs > 1 {
		switch name {
		case "rps":
			if r.RPSMin != nil && r.RPSMax != nil {
				return *r.RPSMin, *r.RPSMax, true
			}
		case "p99_ms":
			if r.P99MSMin != nil && r.P99MSMax != nil {
				return *r.P99MSMin, *r.P99MSMax, true
			}
		}
	}
	return 0, 0, false
}
