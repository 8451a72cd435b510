package lab

import (
	"fmt"
	"slices"
	"strings"
)

// Claim is a report's claim stated as a ratio between two rows' figures:
// Numerator's Metric / Denominator's Metric ≥ AtLeast (or ≤ AtMost). An
// experiment's first claim reruns the report's own setup; later ones are
// what we find under fairer conditions.
type Claim struct {
	Text        string
	Metric      string // a row figure (see Row.Figure): "rps", "mean_ms", "p99_ms", "rss_mb_avg", "heap_mb_avg", "cpu_avg"
	Numerator   string // row label
	Denominator string // row label
	AtLeast     float64
	AtMost      float64 // used when AtLeast is 0: the ratio must be ≤ AtMost
	// Report is the report's own figure for the ratio ("450 / 169 = 2.66"),
	// or why it gives none; shown beside ours.
	Report string
	// Gates are labels of further rows, fault rows mostly, whose
	// integrity gates the claim too: a system that loses data under a
	// fault has not earned its speed.
	Gates []string
}

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
	Pairs       int       `json:"pairs"`
	PairRatios  []float64 `json:"pair_ratios"`
	NoisyPairs  int       `json:"noisy_pairs"`
	Metric      string    `json:"metric"`
	Numerator   string    `json:"numerator"`
	Denominator string    `json:"denominator"`
	Threshold   string    `json:"threshold"`
	Report      string    `json:"report,omitempty"`
	// Why says why the verdict is invalid or has no interval.
	Why string `json:"why,omitempty"`
}

func (c Claim) threshold() string {
	if c.AtLeast > 0 {
		return fmt.Sprintf(">= %g", c.AtLeast)
	}
	return fmt.Sprintf("<= %g", c.AtMost)
}

// decide reads a verdict from an interval of the ratio: the interval must
// clear the threshold to reproduce, lie wholly beyond it not to.
func (c Claim) decide(iv interval) Verdict {
	if c.AtLeast > 0 {
		switch {
		case iv.lo > c.AtLeast:
			return Reproduced
		case iv.hi < c.AtLeast:
			return NotReproduced
		}
		return Inconclusive
	}
	switch {
	case iv.hi < c.AtMost:
		return Reproduced
	case iv.lo > c.AtMost:
		return NotReproduced
	}
	return Inconclusive
}

// pairRatios joins the per-run figures of the claim's two rows by round:
// one ratio per round both ran in, and whether either run was noisy.
func (c Claim) pairRatios(num, den *Row) (ratios []float64, noisy int) {
	byRound := map[int]RunValues{}
	for _, r := range den.PerRun {
		byRound[r.Round] = r
	}
	for _, a := range num.PerRun {
		b, ok := byRound[a.Round]
		if !ok {
			continue
		}
		x, okx := a.Values[c.Metric]
		y, oky := b.Values[c.Metric]
		if !okx || !oky {
			continue
		}
		ratios = append(ratios, x/y)
		if a.Noisy || b.Noisy {
			noisy++
		}
	}
	return ratios, noisy
}

// Evaluate judges c against rows: INVALID when a row is missing or fails
// an integrity gate, else the verdict of the ratio's interval over the
// rows' pairs. Missing figures give no ratio, never a guess.
func (c Claim) Evaluate(rows []*Row) ClaimResult {
	out := ClaimResult{Claim: c.Text, Metric: c.Metric, Numerator: c.Numerator, Denominator: c.Denominator,
		Threshold: c.threshold(), Report: c.Report, CILevel: Level, Verdict: Invalid, PairRatios: []float64{}}
	num, den := findRow(rows, c.Numerator), findRow(rows, c.Denominator)
	if num == nil || den == nil {
		var missing []string
		for _, l := range []string{c.Numerator, c.Denominator} {
			if findRow(rows, l) == nil {
				missing = append(missing, fmt.Sprintf("%q", l))
			}
		}
		out.Why = "not measured: " + strings.Join(missing, ", ")
		return out
	}
	var gates []string
	for _, r := range []*Row{num, den} {
		for _, f := range r.IntegrityFailures() {
			gates = append(gates, fmt.Sprintf("%q %s", r.Label, f))
		}
	}
	for _, label := range c.Gates {
		r := findRow(rows, label)
		if r == nil {
			gates = append(gates, fmt.Sprintf("%q was not measured", label))
			continue
		}
		for _, f := range r.IntegrityFailures() {
			gates = append(gates, fmt.Sprintf("%q %s", r.Label, f))
		}
	}
	ratios, noisy := c.pairRatios(num, den)
	out.Pairs, out.NoisyPairs = len(ratios), noisy
	if ratios != nil {
		out.PairRatios = ratios
	}
	iv, ok := ratioInterval(ratios, Level)
	switch {
	case ok:
		out.Ratio, out.CI = F(iv.est), []float64{iv.lo, iv.hi}
	default:
		if a, b := num.Figure(c.Metric), den.Figure(c.Metric); a != nil && b != nil && *b != 0 {
			out.Ratio = F(*a / *b)
		}
	}
	switch {
	case len(gates) > 0:
		out.Why = "integrity: " + strings.Join(gates, "; ")
	case out.Ratio == nil:
		out.Why = fmt.Sprintf("%s is missing or zero in a row of the claim", c.Metric)
	case !ok:
		out.Verdict = Inconclusive
		out.Why = fmt.Sprintf("%d pair(s) of runs: no confidence interval without at least 2", len(ratios))
	default:
		out.Verdict = c.decide(iv)
	}
	out.Reproduced = out.Verdict == Reproduced
	return out
}

// Figure returns the named figure of the row, nil when not measured.
func (r *Row) Figure(metric string) *float64 {
	switch metric {
	case "rps":
		return r.RPS
	case "mean_ms":
		return r.MeanMS
	case "p50_ms":
		return r.P50MS
	case "p95_ms":
		return r.P95MS
	case "p99_ms":
		return r.P99MS
	case "max_ms":
		return r.MaxMS
	case "heap_mb_avg":
		return r.HeapMBAvg
	case "heap_mb_max":
		return r.HeapMBMax
	case "goroutines_avg":
		return r.GoroutinesAvg
	case "goroutines_max":
		return r.GoroutinesMax
	case "rss_mb_avg":
		return r.RSSMBAvg
	case "rss_mb_max":
		return r.RSSMBMax
	case "cpu_avg":
		return r.CPUAvg
	case "success_ratio":
		return r.SuccessRatio
	}
	if v, ok := r.Figures[metric]; ok {
		return &v
	}
	return nil
}

// figureNames are the metrics Row.Figure knows besides Row.Figures.
var figureNames = []string{"rps", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms", "heap_mb_avg", "heap_mb_max",
	"goroutines_avg", "goroutines_max", "rss_mb_avg", "rss_mb_max", "cpu_avg", "success_ratio"}

// values returns every figure the row has, by name: what a run keeps in
// RunValues so that claims can pair runs on any metric.
func (r *Row) values() map[string]float64 {
	out := map[string]float64{}
	for _, name := range figureNames {
		if v := r.Figure(name); v != nil {
			out[name] = *v
		}
	}
	for k, v := range r.Figures {
		out[k] = v
	}
	return out
}

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
// successfully unless it states its own bound (Measurement.MinSuccess).
const DefaultSuccessBound = 0.99

func (r *Row) successBound() float64 {
	if r.SuccessBound > 0 {
		return r.SuccessBound
	}
	return DefaultSuccessBound
}

func findRow(rows []*Row, label string) *Row {
	for _, r := range rows {
		if r.Label == label {
			return r
		}
	}
	return nil
}

// Judge fills res's verdicts from the experiment's claims. A claim of an
// experiment that failed is INVALID whatever its rows say: a run that did
// not finish is not evidence. The result's top-level claim, ratio,
// verdict and reproduced mirror the first claim.
func Judge(res *Result, claims []Claim) {
	res.Claims = nil
	for _, c := range claims {
		cr := c.Evaluate(res.Rows)
		if res.Error != "" && cr.Verdict != Invalid {
			cr.Verdict, cr.Reproduced = Invalid, false
			cr.Why = "the experiment did not finish: " + res.Error
		}
		res.Claims = append(res.Claims, cr)
	}
	res.Claim, res.Ratio, res.Verdict, res.Reproduced = "", nil, Invalid, false
	if len(res.Claims) > 0 {
		first := res.Claims[0]
		res.Claim, res.Ratio, res.Verdict, res.Reproduced = first.Claim, first.Ratio, first.Verdict, first.Reproduced
	}
}

// claimsOver returns the claims whose two rows are both among labels.
func claimsOver(claims []Claim, labels []string) []Claim {
	var out []Claim
	for _, c := range claims {
		if slices.Contains(labels, c.Numerator) && slices.Contains(labels, c.Denominator) {
			out = append(out, c)
		}
	}
	return out
}
