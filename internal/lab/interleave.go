package lab

import (
	"context"
	"fmt"

	"github.com/highload-lab/hlab/loadgen"
)

// Interleaved is a set of rows measured turn by turn: the first run of
// each, then the second of each, and so on. On a shared machine whose
// load comes and goes (other builds, a noisy neighbour), a burst then
// weighs on every row alike instead of on whichever row ran during it, so
// ratios between the rows stay meaningful. Each row's services must be
// running for the whole set.
type Interleaved struct {
	Measurements []Measurement
	// Around, when set, wraps each measured run of Measurements[i]: it
	// must call run once and may sample something around it (a
	// dependency's CPU, events a client received).
	Around func(i int, run func() error) error
}

// MeasureInterleaved measures s's rows: each warms up just before its
// first run, then the rows take turns for Opts.Repeats() rounds. Rows come
// back in the order of s.Measurements, as Measure would make them.
func (r *Run) MeasureInterleaved(ctx context.Context, s Interleaved) ([]*Row, error) {
	n := r.Opts.Repeats()
	runs := make([][]runFigures, len(s.Measurements))
	for round := range n {
		for i, m := range s.Measurements {
			if round == 0 && !m.NoWarmup {
				r.Progress.Step(m.Label+": warm-up", r.Opts.Warmup())
				if _, err := loadgen.Run(ctx, m.URL, append(m.Load, loadgen.Duration(r.Opts.Warmup()))...); err != nil {
					return nil, fmt.Errorf("lab: %s warm-up: %w", m.Label, err)
				}
			}
			r.Progress.Step(fmt.Sprintf("%s: run %d/%d", m.Label, round+1, n), m.Duration)
			var fig runFigures
			measure := func() error {
				var err error
				fig, err = r.measureOnce(ctx, m)
				return err
			}
			var err error
			if s.Around != nil {
				err = s.Around(i, measure)
			} else {
				err = measure()
			}
			if err != nil {
				return nil, err
			}
			runs[i] = append(runs[i], fig)
		}
	}
	rows := make([]*Row, len(s.Measurements))
	for i, m := range s.Measurements {
		row := aggregate(m.Label, runs[i])
		row.Ref = m.Ref
		res := runs[i][0].res
		row.Model, row.Connections, row.Rate = res.Model, res.Connections, res.Rate
		rows[i] = row
	}
	return rows, nil
}
