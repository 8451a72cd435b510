package labresult

import (
	"fmt"
	"strings"
)

// Claim is a report's claim stated as a ratio between two rows' figures,
// held to a bound: "three replicas serve ≥ 2x the rps of one" is
// Ratio{Num: three, Den: one, Metric: "rps"} with AtLeast(2). An
// experiment's first claim reruns the report's own setup; later ones are
// what we find under fairer conditions, named as ours.
type Claim struct {
	Text string
	Ratio
	Bound Bound
	// Report is the report's own figure for the ratio ("450 / 169 =
	// 2.66"), or why it gives none; shown beside ours. ReportRatio is
	// that figure as a number (0: none), drawn on the verdicts' chart.
	Report      string
	ReportRatio float64
	// Gates are keys of further rows, fault rows mostly, whose integrity
	// gates the claim too: a system that loses data under a fault has not
	// earned its speed.
	Gates []Key
}

// Key identifies the claim across runs: its two rows and its figure.
func (c Claim) Key() string {
	k := fmt.Sprintf("%s/%s:%s", c.Num, c.Den, c.Metric)
	if c.DenMetric != "" {
		k += "/" + c.DenMetric
	}
	return k
}

// Keys lists every row key the claim reads: its two rows and its gates.
func (c Claim) Keys() []Key { return append([]Key{c.Num, c.Den}, c.Gates...) }

// Verdict is what the lab concludes about a claim.
type Verdict string

const (
	// Reproduced: the whole confidence interval of the ratio is on the
	// claim's side of the threshold.
	Reproduced Verdict = "reproduced"
	// NotReproduced: the whole interval is on the other side.
	NotReproduced Verdict = "not_reproduced"
	// Inconclusive: the interval straddles the threshold, or there is no
	// interval (fewer than two pairs).
	Inconclusive Verdict = "inconclusive"
	// Invalid: an integrity gate failed (data lost, requests failed, a
	// service died, no quota, the experiment did not finish): the figures
	// are not evidence either way.
	Invalid Verdict = "invalid"
)

// Word is the verdict as the text and HTML reports print it.
func (v Verdict) Word() string {
	return strings.ToUpper(strings.ReplaceAll(string(v), "_", " "))
}

// ClaimResult is a claim's verdict on this machine.
type ClaimResult struct {
	Claim string `json:"claim"`
	// Key identifies the claim across runs (Claim.Key).
	Key string `json:"key"`
	// Ratio is the geometric mean of the pair ratios (with no pairs: the
	// ratio of the rows' medians), nil when not measured.
	Ratio      *float64 `json:"ratio"`
	Reproduced bool     `json:"reproduced"`
	Verdict    Verdict  `json:"verdict"`
	// CI is the Level confidence interval of the ratio, [low, high]; nil
	// without at least two pairs.
	CI      []float64 `json:"ci"`
	CILevel float64   `json:"ci_level"`
	// Pairs is how many pairs of runs the ratio comes from; PairRatios
	// each pair's ratio, in the order measured; NoisyPairs how many had a
	// run that other processes on the machine disturbed (Row.Noisy).
	Pairs      int       `json:"pairs"`
	PairRatios []float64 `json:"pair_ratios"`
	NoisyPairs int       `json:"noisy_pairs"`
	Metric     string    `json:"metric"`
	DenMetric  string    `json:"den_metric,omitempty"`
	// Numerator and Denominator are the rows' labels, NumKey and DenKey
	// their keys.
	Numerator   string  `json:"numerator"`
	Denominator string  `json:"denominator"`
	NumKey      Key     `json:"num_key"`
	DenKey      Key     `json:"den_key"`
	Threshold   string  `json:"threshold"`
	Report      string  `json:"report,omitempty"`
	ReportRatio float64 `json:"report_ratio,omitempty"`
	// Why says why the verdict is invalid or has no interval.
	Why string `json:"why,omitempty"`
}

// Evaluate judges c against rows: INVALID when a row is missing or fails
// an integrity gate, else the verdict of the ratio's interval over the
// rows' pairs. Missing figures give no ratio, never a guess.
func (c Claim) Evaluate(rows []*Row) ClaimResult {
	out := ClaimResult{Claim: c.Text, Key: c.Key(), Metric: c.Metric, DenMetric: c.DenMetric, NumKey: c.Num, DenKey: c.Den,
		Threshold: c.Bound.String(), Report: c.Report, ReportRatio: c.ReportRatio, CILevel: Level, Verdict: Invalid, PairRatios: []float64{}}
	idx := byKey(rows)
	num, den := idx[c.Num], idx[c.Den]
	if num == nil || den == nil {
		out.Why = "not measured: " + missing(idx, c.Num, c.Den)
		return out
	}
	out.Numerator, out.Denominator = num.Label, den.Label
	gates := rowGates(idx, c.Keys()...)
	e := c.measure(num, den, Level)
	out.Pairs, out.NoisyPairs, out.Ratio = e.pairs, e.noisy, e.value
	if e.pairRatios != nil {
		out.PairRatios = e.pairRatios
	}
	if e.interval {
		out.CI = []float64{e.lo, e.hi}
	}
	switch {
	case len(gates) > 0:
		out.Why = "integrity: " + strings.Join(gates, "; ")
	case out.Ratio == nil:
		out.Why = fmt.Sprintf("%s is missing or zero in a row of the claim", c.Metric)
	case !e.interval:
		out.Verdict = Inconclusive
		out.Why = fmt.Sprintf("%d pair(s) of runs: no confidence interval without at least 2", e.pairs)
	default:
		out.Verdict = c.decide(e.lo, e.hi)
	}
	out.Reproduced = out.Verdict == Reproduced
	return out
}

func (c Claim) decide(lo, hi float64) Verdict {
	switch c.Bound.side(lo, hi) {
	case +1:
		return Reproduced
	case -1:
		return NotReproduced
	}
	return Inconclusive
}

// Decided reports whether c's interval at level, over the pairs measured
// so far, clears or misses its bound, and describes the interval: what
// the runner reads to stop adding rounds early (see lab.Paired).
func (c Claim) Decided(rows []*Row, level float64) (bool, string) {
	idx := byKey(rows)
	num, den := idx[c.Num], idx[c.Den]
	if num == nil || den == nil {
		return false, "no interval yet"
	}
	ratios, _ := c.pairs(num, den)
	iv, ok := ratioInterval(ratios, level)
	if !ok {
		return false, "no interval yet"
	}
	return c.decide(iv.lo, iv.hi) != Inconclusive, fmt.Sprintf("%.2f [%.2f, %.2f] at %.1f%%", iv.est, iv.lo, iv.hi, level*100)
}
