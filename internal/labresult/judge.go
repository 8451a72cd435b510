package labresult

import (
	"fmt"
	"strconv"
	"strings"
)

// Bound is the threshold a judged quantity is held to: at least or at
// most Value. The zero Bound judges nothing (a ratio shown, not judged).
type Bound struct {
	Op    string  `json:"op"` // ">=" or "<="
	Value float64 `json:"value"`
}

// AtLeast is the bound "≥ v".
func AtLeast(v float64) Bound { return Bound{Op: ">=", Value: v} }

// AtMost is the bound "≤ v".
func AtMost(v float64) Bound { return Bound{Op: "<=", Value: v} }

// IsZero reports whether b bounds nothing.
func (b Bound) IsZero() bool { return b.Op == "" }

func (b Bound) String() string {
	if b.IsZero() {
		return ""
	}
	return b.Op + " " + strconv.FormatFloat(b.Value, 'f', -1, 64)
}

// side reads a range [lo, hi] of a quantity against the bound: +1 when the
// whole range satisfies it, -1 when none of it does, 0 when it straddles.
func (b Bound) side(lo, hi float64) int {
	if b.Op == "<=" {
		lo, hi = -hi, -lo
		b.Value = -b.Value
	}
	switch {
	case lo >= b.Value:
		return +1
	case hi < b.Value:
		return -1
	}
	return 0
}

// Ratio is a quantity of two rows, paired by round: Num's figure Metric
// over Den's figure DenMetric (Metric when empty), or, with Of, any
// function of one run's figures of each row. The rows measured in rounds
// (lab.Paired) give one ratio per round and so a confidence interval.
type Ratio struct {
	Num, Den Key
	Metric   string
	// DenMetric is the denominator's figure when it differs from the
	// numerator's: a gateway's CPU per message over a direct producer's.
	DenMetric string
	// Of, when set, computes the quantity from one run's figures of each
	// row (RunValues.Values); ok false when it cannot. Metric then names
	// the quantity for reading.
	Of func(num, den map[string]float64) (v float64, ok bool) `json:"-"`
}

func (q Ratio) denMetric() string {
	if q.DenMetric != "" {
		return q.DenMetric
	}
	return q.Metric
}

// of computes the quantity from two sets of figures.
func (q Ratio) of(num, den map[string]float64) (float64, bool) {
	if q.Of != nil {
		return q.Of(num, den)
	}
	x, okx := num[q.Metric]
	y, oky := den[q.denMetric()]
	if !okx || !oky || y == 0 {
		return 0, false
	}
	return x / y, true
}

// String names the quantity: "rps of a / rps of b".
func (q Ratio) String() string {
	if q.Of != nil {
		return fmt.Sprintf("%s of %s and %s", q.Metric, q.Num, q.Den)
	}
	return fmt.Sprintf("%s of %s / %s of %s", q.Metric, q.Num, q.denMetric(), q.Den)
}

// pairs joins the rows' runs by round (rounds of a Paired set, not the
// runs of rows measured on their own): one ratio per round both ran in,
// and how many of those had a noisy run.
func (q Ratio) pairs(num, den *Row) (ratios []float64, noisy int) {
	byRound := map[int]RunValues{}
	for _, r := range den.PerRun {
		if r.Round > 0 {
			byRound[r.Round] = r
		}
	}
	for _, a := range num.PerRun {
		b, ok := byRound[a.Round]
		if a.Round == 0 || !ok {
			continue
		}
		v, ok := q.of(a.Values, b.Values)
		if !ok {
			continue
		}
		ratios = append(ratios, v)
		if a.Noisy || b.Noisy {
			noisy++
		}
	}
	return ratios, noisy
}

// medians is the quantity of the rows' figures (their medians over runs).
func (q Ratio) medians(num, den *Row) (float64, bool) {
	return q.of(num.allFigures(), den.allFigures())
}

// estimate is a quantity measured over rows: a value, and a range it
// lies in (an interval of the pairs, or the runs' spread).
type estimate struct {
	value      *float64
	lo, hi     float64
	ranged     bool // lo and hi are set
	interval   bool // they are the Level interval of pairs
	pairs      int
	pairRatios []float64
	noisy      int
}

// measure estimates q over num and den: the geometric mean of the pair
// ratios and its Level interval with at least two pairs; else the ratio
// of the rows' medians.
func (q Ratio) measure(num, den *Row, level float64) estimate {
	ratios, noisy := q.pairs(num, den)
	e := estimate{pairs: len(ratios), pairRatios: ratios, noisy: noisy}
	if iv, ok := ratioInterval(ratios, level); ok {
		e.value, e.lo, e.hi, e.ranged, e.interval = F(iv.est), iv.lo, iv.hi, true, true
		return e
	}
	if v, ok := q.medians(num, den); ok {
		e.value = F(v)
	}
	return e
}

// rowGates lists why rows are not evidence (their integrity failures),
// and the keys among want that were not measured.
func rowGates(rows map[Key]*Row, want ...Key) []string {
	var out []string
	for _, k := range want {
		r := rows[k]
		if r == nil {
			out = append(out, fmt.Sprintf("%q was not measured", k))
			continue
		}
		for _, f := range r.IntegrityFailures() {
			out = append(out, fmt.Sprintf("%q %s", r.Label, f))
		}
	}
	return out
}

// byKey indexes rows by key.
func byKey(rows []*Row) map[Key]*Row {
	m := make(map[Key]*Row, len(rows))
	for _, r := range rows {
		m[r.Key] = r
	}
	return m
}

func missing(rows map[Key]*Row, keys ...Key) string {
	var out []string
	for _, k := range keys {
		if rows[k] == nil {
			out = append(out, fmt.Sprintf("%q", k))
		}
	}
	return strings.Join(out, ", ")
}
