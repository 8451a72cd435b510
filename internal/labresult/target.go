package labresult

import (
	"fmt"
	"strings"
)

// Target is a judgement of ours that is not a claim of the report: a
// figure held to a fixed bound ("1,000,000 requests in under 360 s",
// "the gateway's echo rate ≥ 0.95x the bare grpc-go server's"). The
// figure is one row's (Row and Metric) or a Ratio of two rows', paired by
// round where they ran in rounds.
//
// A target with no Bound is a ratio shown, not judged: it is kept as
// data (Result.Ratios) beside the targets, so that no figure a reader
// needs lives only in a formatted note.
type Target struct {
	// Key identifies the target across runs; Text is how it reads.
	Key  Key
	Text string
	// Row and Metric name one row's figure; or Ratio names two rows'.
	Row    Key
	Metric string
	Ratio  *Ratio
	Bound  Bound
	// Unit is the figure's unit, for reading: by default a standard
	// figure's own, and "x" for a ratio.
	Unit string
}

func (t Target) unit() string {
	switch {
	case t.Unit != "":
		return t.Unit
	case t.Ratio != nil:
		return "x"
	case standardByName[t.Metric] != nil:
		return standardByName[t.Metric].Unit
	}
	return ""
}

// Keys lists the row keys the target reads.
func (t Target) Keys() []Key {
	if t.Ratio != nil {
		return []Key{t.Ratio.Num, t.Ratio.Den}
	}
	return []Key{t.Row}
}

// TargetVerdict is what the lab concludes about a target. There are
// three, and nothing else: holds, fails, or inconclusive when the
// figure's spread straddles the bound or the figure is not evidence.
type TargetVerdict string

const (
	// Holds: the whole spread of the figure satisfies the bound.
	Holds TargetVerdict = "holds"
	// Fails: none of it does.
	Fails TargetVerdict = "fails"
	// Undecided: the spread straddles the bound, or the figure was not
	// measured or its rows failed an integrity gate (Why says which).
	Undecided TargetVerdict = "inconclusive"
)

// Word is the verdict as the text and HTML reports print it.
func (v TargetVerdict) Word() string { return strings.ToUpper(string(v)) }

// TargetResult is a target's (or a shown ratio's) figure and verdict on
// this machine.
type TargetResult struct {
	Target string `json:"target"`
	Key    Key    `json:"key"`
	// Value is the figure: the row's median over runs, or the ratio's
	// geometric mean over pairs (the ratio of medians without pairs); nil
	// when not measured.
	Value *float64 `json:"value"`
	Unit  string   `json:"unit,omitempty"`
	// Bound is the threshold ("<= 360"), empty for a ratio shown.
	Bound   string        `json:"bound,omitempty"`
	Verdict TargetVerdict `json:"verdict,omitempty"`
	// Spread is the range the figure lies in, [low, high]: the runs'
	// min and max, or the ratio's Level interval over pairs; nil with a
	// single value.
	Spread []float64 `json:"spread,omitempty"`
	Pairs  int       `json:"pairs,omitempty"`
	// The figure read: Row (one row's), or Num and Den (a ratio).
	Row       Key    `json:"row,omitempty"`
	Num       Key    `json:"num,omitempty"`
	Den       Key    `json:"den,omitempty"`
	Metric    string `json:"metric"`
	DenMetric string `json:"den_metric,omitempty"`
	Why       string `json:"why,omitempty"`
}

// Evaluate judges t against rows.
func (t Target) Evaluate(rows []*Row) TargetResult {
	out := TargetResult{Target: t.Text, Key: t.Key, Unit: t.unit(), Bound: t.Bound.String(), Metric: t.Metric}
	if !t.Bound.IsZero() {
		out.Verdict = Undecided
	}
	idx := byKey(rows)
	var e estimate
	if q := t.Ratio; q != nil {
		out.Num, out.Den, out.Metric, out.DenMetric = q.Num, q.Den, q.Metric, q.DenMetric
		num, den := idx[q.Num], idx[q.Den]
		if num == nil || den == nil {
			out.Why = "not measured: " + missing(idx, q.Num, q.Den)
			return out
		}
		e = q.measure(num, den, Level)
		if !e.ranged {
			e.lo, e.hi, e.ranged = ratioSpread(*q, num, den)
		}
	} else {
		out.Row = t.Row
		row := idx[t.Row]
		if row == nil {
			out.Why = "not measured: " + missing(idx, t.Row)
			return out
		}
		e.value = row.Figure(t.Metric)
		e.lo, e.hi, e.ranged = row.Spread(t.Metric)
	}
	out.Value, out.Pairs = e.value, e.pairs
	if e.ranged {
		out.Spread = []float64{e.lo, e.hi}
	}
	gates := rowGates(idx, t.Keys()...)
	switch {
	case len(gates) > 0:
		out.Why = "integrity: " + strings.Join(gates, "; ")
	case e.value == nil:
		out.Why = fmt.Sprintf("%s was not measured, or is zero where it divides", out.Metric)
	case out.Verdict == "":
		// A ratio shown, not judged.
	default:
		lo, hi := *e.value, *e.value
		if e.ranged {
			lo, hi = e.lo, e.hi
		}
		switch t.Bound.side(lo, hi) {
		case +1:
			out.Verdict = Holds
		case -1:
			out.Verdict = Fails
		}
	}
	return out
}

// ratioSpread is the range of a ratio of rows not measured in rounds:
// its extremes over the rows' runs, when both rows kept theirs.
func ratioSpread(q Ratio, num, den *Row) (lo, hi float64, ok bool) {
	if q.Of != nil {
		return 0, 0, false
	}
	nlo, nhi, okN := num.Spread(q.Metric)
	dlo, dhi, okD := den.Spread(q.denMetric())
	if !okN || !okD || dlo <= 0 || (nlo == nhi && dlo == dhi) {
		return 0, 0, false
	}
	return nlo / dhi, nhi / dlo, true
}
