package lab

import (
	"math"
	"slices"

	"github.com/highload-lab/hlab/internal/labresult"
)

// runFigures is one measured run's figures.
type runFigures struct {
	sample *Sample
	cpu    float64
	rss    float64
	rssMx  float64
	thr    int64

	heap     *heapFigures       // nil when not sampled
	counters map[string]float64 // increases over the run, by Counter.Metric's name

	outside float64  // cores used outside the lab during the run
	loadAvg *float64 // 1-minute load average at its end
	round   int      // the round of a Paired set, else 0
}

func (f runFigures) noisy() bool { return f.outside > labresult.NoisyCPU }

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }

// aggregate makes the row key of measured runs: each figure is the median
// over runs, RPS (goodput) and p99 also with their min and max, and each
// run's figures are kept (Row.PerRun) for claims to pair and targets to
// read their spread.
func aggregate(key labresult.Key, runs []runFigures) *labresult.Row {
	row := aggregateRuns(key, runs)
	for _, f := range runs {
		one := aggregateRuns(key, []runFigures{f})
		row.PerRun = append(row.PerRun, labresult.RunValues{Round: f.round, Values: one.RunValues(), OutsideCPU: f.outside, Noisy: f.noisy()})
	}
	return row
}

func aggregateRuns(key labresult.Key, runs []runFigures) *labresult.Row {
	row := &labresult.Row{Key: key, Runs: len(runs), Errors: map[string]int64{}, StatusCodes: map[string]int64{}}
	if len(runs) == 0 {
		return row
	}
	medians(row, runs)
	ownFigures(row, runs)
	for _, r := range runs {
		addRun(row, r)
	}
	rps := make([]float64, len(runs))
	p99 := make([]float64, len(runs))
	for i, r := range runs {
		rps[i], p99[i] = r.sample.Goodput(), ms(r.sample.Latency.P99)
	}
	row.RPSMin, row.RPSMax = labresult.F(slices.Min(rps)), labresult.F(slices.Max(rps))
	row.P99MSMin, row.P99MSMax = labresult.F(slices.Min(p99)), labresult.F(slices.Max(p99))
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

// medians sets the row's standard figures, each the median over runs.
func medians(row *labresult.Row, runs []runFigures) {
	med := func(get func(runFigures) float64) *float64 {
		vals := make([]float64, len(runs))
		for i, r := range runs {
			vals[i] = get(r)
		}
		return labresult.F(labresult.Median(vals))
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
}

// ownFigures sets the experiment's own figures: counter increases,
// summed over runs, and a driver's figures, their median.
func ownFigures(row *labresult.Row, runs []runFigures) {
	driverFigs := map[string][]float64{}
	for _, r := range runs {
		for k, v := range r.counters {
			row.Add(labresult.Metric{Name: k}, v)
		}
		for k, v := range r.sample.Figures {
			driverFigs[k] = append(driverFigs[k], v)
		}
	}
	for k, v := range driverFigs {
		row.Set(labresult.Metric{Name: k}, labresult.Median(v))
	}
}

// addRun adds what a run counts to the row's totals (requests, errors,
// losses) and keeps its worst noise and generator load.
func addRun(row *labresult.Row, r runFigures) {
	s := r.sample
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
		row.OutsideCPU = labresult.F(r.outside)
	}
	if r.loadAvg != nil {
		row.LoadAvg = labresult.F(*r.loadAvg)
	}
	row.Noisy = row.Noisy || r.noisy()
	if g := s.Generator; g.CPUsAvailable > 0 {
		if row.GeneratorCPU == nil || g.CPU > *row.GeneratorCPU {
			row.GeneratorCPU, row.GeneratorCPUsAvailable = labresult.F(g.CPU), labresult.F(g.CPUsAvailable)
		}
		row.GeneratorSaturated = row.GeneratorSaturated || g.Saturated
	}
}
