package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/labresult"
)

// Paired is a set of rows measured in rounds: in each round every row
// runs once, in the order of Measurements, reversed every other round
// (AB, BA, AB, ...; ABC, CBA, ...), so that neither a row's place in the
// round nor load from elsewhere that drifts over seconds weighs on one
// row more than another. A claim comparing two of the rows gets one ratio
// per round: a pair of runs measured back to back.
//
// The experiment's claims over these rows decide how many rounds run.
// After MinRounds, the lab stops as soon as every such claim is decided
// at InterimLevel (99.9%), and otherwise adds rounds until the next one
// would overrun Budget or MaxRounds is reached. The verdict itself is
// always read from the Level (95%) interval: stopping early only on a
// much stricter interval keeps the error of looking several times close
// to the 5% of looking once (the Haybittle-Peto rule of group-sequential
// trials), where stopping on the first 95% interval that clears would
// inflate it several times over.
type Paired struct {
	Measurements []Measurement
	// Around, when set, wraps each measured run of Measurements[i]: it
	// must call run once and may sample something around it.
	Around func(i int, run func() error) error
	// Budget is the time the rounds may take (default
	// Options.PairBudget()); MinRounds (default 3) run whatever it says.
	Budget    time.Duration
	MinRounds int
	// MaxRounds bounds the rounds (default 12).
	MaxRounds int
}

// Default rounds of a Paired set.
const (
	DefaultMinRounds = 3
	DefaultMaxRounds = 12
)

// MeasurePaired warms each row up (unless done already), then measures
// the rows in rounds as Paired says. Rows come back in the order of
// s.Measurements, each with its runs' figures in PerRun (by round) for
// the claims to pair.
func (r *Run) MeasurePaired(ctx context.Context, s Paired) ([]*labresult.Row, error) {
	minR, maxR, budget := s.MinRounds, s.MaxRounds, s.Budget
	if r.Opts.Pairs > 0 {
		minR, maxR = r.Opts.Pairs, r.Opts.Pairs
	}
	defaults.Positive(&minR, DefaultMinRounds)
	defaults.Positive(&maxR, DefaultMaxRounds)
	maxR = max(maxR, minR)
	defaults.Positive(&budget, r.Opts.PairBudget())
	keys := make([]labresult.Key, len(s.Measurements))
	labels := make([]string, len(s.Measurements))
	durs := make([]time.Duration, len(s.Measurements))
	for i := range s.Measurements {
		m := &s.Measurements[i]
		keys[i], labels[i] = m.Key, r.Label(m.Key)
		d, err := r.prepare(ctx, m)
		if err != nil {
			return nil, err
		}
		durs[i] = d
	}
	claims := claimsOver(r.spec.Claims, keys)
	r.place()
	runs := make([][]runFigures, len(s.Measurements))
	start := time.Now()
	for round := 1; round <= maxR; round++ {
		roundStart := time.Now()
		for k := range s.Measurements {
			i := k
			if round%2 == 0 {
				i = len(s.Measurements) - 1 - k
			}
			m := s.Measurements[i]
			r.Progress.Step(fmt.Sprintf("%s: round %d (of %d-%d)", labels[i], round, minR, maxR), durs[i])
			var fig runFigures
			measure := func() error {
				var err error
				fig, err = r.measureOnce(ctx, m, durs[i])
				return err
			}
			var err error
			if s.Around != nil {
				err = s.Around(i, measure)
			} else {
				err = measure()
			}
			if err != nil {
				return nil, r.failedPaired(s.Measurements, runs, i, err)
			}
			fig.round = round
			runs[i] = append(runs[i], fig)
		}
		if round < minR {
			continue
		}
		rows := r.pairedRows(s.Measurements, runs)
		decided, summary := interimDecided(claims, rows)
		perRound := time.Since(start) / time.Duration(round)
		lastRound := time.Since(roundStart)
		switch {
		case decided:
			r.Progress.Logf("%s: decided after %d rounds (%s)", strings.Join(labels, " / "), round, summary)
			return rows, nil
		case round == maxR:
			return rows, nil
		case time.Since(start)+max(perRound, lastRound) > budget:
			r.Progress.Logf("%s: time budget of %v spent after %d rounds (%s)", strings.Join(labels, " / "), budget, round, summary)
			return rows, nil
		}
	}
	return r.pairedRows(s.Measurements, runs), nil
}

// failedPaired handles a run of ms[i] that failed: when a process died,
// every row measured so far joins the result, the dead one marked, so
// that the claims using them are INVALID for that reason.
func (r *Run) failedPaired(ms []Measurement, runs [][]runFigures, i int, err error) error {
	var died *diedError
	if !errors.As(err, &died) {
		return err
	}
	rows := r.pairedRows(ms, runs)
	rows[i].Died = died.what
	for _, row := range rows {
		r.AddRow(row)
	}
	return err
}

// pairedRows aggregates each measurement's runs into its row; each run
// keeps its round (Row.PerRun) for the claims to pair.
func (r *Run) pairedRows(ms []Measurement, runs [][]runFigures) []*labresult.Row {
	rows := make([]*labresult.Row, len(ms))
	for i, m := range ms {
		rows[i] = r.finishRow(m, runs[i])
	}
	return rows
}

// interimDecided reports whether every claim's InterimLevel interval
// clears or misses its threshold, with each claim's interval so far.
func interimDecided(claims []labresult.Claim, rows []*labresult.Row) (bool, string) {
	all := true
	var parts []string
	for _, c := range claims {
		decided, summary := c.Decided(rows, labresult.InterimLevel)
		all = all && decided
		parts = append(parts, summary)
	}
	return all, strings.Join(parts, "; ")
}
