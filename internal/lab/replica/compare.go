package replicaexp

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// setup is one closed-model row that interleave measures.
type setup struct {
	label    string
	svc      *lab.Service
	path     string
	conns    int
	ref      *lab.Ref
	counters []lab.Counter // summed over the runs into Row.Figures
}

// interleave measures setups in turns (A B, B A, A B, ...: one warm-up
// each, then one run each per turn, the mode's number of turns, the order
// reversed every other turn), so that load from elsewhere on a shared
// machine, which drifts over seconds, falls on every setup alike and
// neither always goes first: rows compared by a claim or a must-show are
// measured this way. Each setup's row is its median run (by RPS) with the spread of all
// runs. Figures get, averaged over the runs (warm-up included), the cores
// used by Postgres (postgres_cpu), by the lab process, which is the load
// generator (loadgen_cpu), and by the whole machine (machine_cpu). It also returns each setup's runs, by
// turn.
func (b *bench) interleave(ctx context.Context, setups []setup) ([]*lab.Row, [][]*lab.Row, error) {
	turns := b.run.Opts.Repeats()
	runs := make([][]*lab.Row, len(setups))
	for turn := range turns {
		for k := range setups {
			i := k
			if turn%2 == 1 {
				i = len(setups) - 1 - k
			}
			s := setups[i]
			meter, clock := b.pg.Proc().Measure(), readCPUClock()
			row, err := b.run.Measure(ctx, lab.Measurement{
				Label: fmt.Sprintf("%s (turn %d/%d)", s.label, turn+1, turns),
				URL:   s.svc.URL(s.path), Procs: []*sandbox.Process{s.svc.Proc}, Ref: s.ref,
				Duration: b.t.run, Repeat: 1, NoWarmup: turn > 0,
				Load: []loadgen.Option{loadgen.Connections(s.conns)}, Counters: s.counters,
			})
			pgUse := meter.Stop()
			machine, self := readCPUClock().since(clock, runtime.NumCPU())
			if err != nil {
				return nil, nil, err
			}
			if row.Figures == nil {
				row.Figures = map[string]float64{}
			}
			row.Figures["postgres_cpu"] = pgUse.CPUAvg
			row.Figures["loadgen_cpu"] = self
			row.Figures["machine_cpu"] = machine
			runs[i] = append(runs[i], row)
		}
	}
	out := make([]*lab.Row, len(setups))
	for i, s := range setups {
		summed := map[string]bool{}
		for _, c := range s.counters {
			summed[c.Key] = true
		}
		out[i] = medianRun(s.label, runs[i], summed)
	}
	return out, runs, nil
}

// medianRun makes one row of single-run rows: the figures of the run with
// the median RPS, the spread of RPS and p99 over all, counts summed, and
// Figures summed (keys in summed, counter increases) or averaged (others).
func medianRun(label string, runs []*lab.Row, summed map[string]bool) *lab.Row {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b *lab.Row) int { return cmp.Compare(fig(a.RPS), fig(b.RPS)) })
	mid := *sorted[(len(sorted)-1)/2]
	out := &mid
	out.Label, out.Runs = label, len(runs)
	out.Requests, out.Late, out.Throttled = 0, 0, 0
	out.Errors, out.StatusCodes, out.Figures = map[string]int64{}, map[string]int64{}, map[string]float64{}
	var rps, p99 []float64
	for _, r := range runs {
		rps, p99 = append(rps, fig(r.RPS)), append(p99, fig(r.P99MS))
		out.Requests += r.Requests
		out.Late += r.Late
		out.Throttled += r.Throttled
		for k, v := range r.Errors {
			out.Errors[k] += v
		}
		for k, v := range r.StatusCodes {
			out.StatusCodes[k] += v
		}
		for k, v := range r.Figures {
			if summed[k] {
				out.Figures[k] += v
			} else {
				out.Figures[k] += v / float64(len(runs))
			}
		}
	}
	out.RPSMin, out.RPSMax = lab.F(slices.Min(rps)), lab.F(slices.Max(rps))
	out.P99MSMin, out.P99MSMax = lab.F(slices.Min(p99)), lab.F(slices.Max(p99))
	return out
}

func fig(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}
