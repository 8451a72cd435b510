package lab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// Sweep searches, in the open model, for the highest arrival rate whose
// p99 latency stays under a bound: the capacity a latency objective leaves.
type Sweep struct {
	Key   labresult.Key
	URL   string
	Procs []*sandbox.Process
	// MaxP99 is the latency objective.
	MaxP99 time.Duration
	// Start is the first rate tried (requests/s), e.g. the closed model's RPS.
	Start float64
	// Probes is how many rates are tried (default 6).
	Probes int
	// Duration of each probe.
	Duration time.Duration
	// Connections caps requests in flight (default 256).
	Connections int
}

// MaxRate runs the sweep: it grows the rate by half while the objective
// holds and bisects once it fails. The row holds the figures of the best
// passing probe (Runs 1) and notes every rate tried; when no rate passes,
// the row's figures are nil and the note says so.
func (r *Run) MaxRate(ctx context.Context, s Sweep) (*labresult.Row, error) {
	if s.Probes == 0 {
		s.Probes = 6
	}
	if s.Connections == 0 {
		s.Connections = 256
	}
	if s.Start <= 0 {
		return nil, fmt.Errorf("lab: sweep %q needs a positive start rate", s.Key)
	}
	var best *labresult.Row
	var tried []string
	lo, hi := 0.0, 0.0 // best passing rate; lowest failing rate (0: none yet)
	rate := s.Start
	for i := range s.Probes {
		r.Progress.Step(fmt.Sprintf("%s: probe %d/%d at %.0f req/s", r.Label(s.Key), i+1, s.Probes, rate), s.Duration)
		fig, err := r.measureOnce(ctx, Measurement{
			Key: s.Key, Procs: s.Procs,
			Driver: HTTP{URL: s.URL, Load: []loadgen.Option{loadgen.Rate(rate), loadgen.Connections(s.Connections)}},
		}, s.Duration)
		if err != nil {
			return nil, err
		}
		p99 := fig.sample.Latency.P99
		ok := p99 < s.MaxP99 && fig.sample.SuccessRatio() >= labresult.DefaultSuccessBound
		verdict := "fail"
		if ok {
			verdict = "ok"
			lo = rate
			best = aggregate(s.Key, []runFigures{fig})
		} else {
			hi = rate
		}
		tried = append(tried, fmt.Sprintf("%.0f/s p99 %.1f ms %s", rate, ms(p99), verdict))
		switch {
		case hi == 0:
			rate = lo * 1.5
		case lo == 0:
			rate = hi / 2
		default:
			rate = (lo + hi) / 2
		}
	}
	note := fmt.Sprintf("highest rate with p99 < %s over %d probes (%s)", s.MaxP99, s.Probes, strings.Join(tried, "; "))
	if best == nil {
		best = NewRow(s.Key)
		best.Model = "open"
		note = "no rate met the objective: " + note
	}
	best.Note = note
	return best, nil
}
