package lab

import "fmt"

// Claim is a report's claim stated as a ratio between two rows' figures:
// Numerator's Metric / Denominator's Metric ≥ AtLeast (or ≤ AtMost).
type Claim struct {
	Text        string
	Metric      string // a row figure (see Row.Figure): "rps", "mean_ms", "p99_ms", "rss_mb_avg", "heap_mb_avg", "cpu_avg"
	Numerator   string // row label
	Denominator string // row label
	AtLeast     float64
	AtMost      float64 // used when AtLeast is 0: the ratio must be ≤ AtMost
}

// ClaimResult is a claim's verdict on this machine.
type ClaimResult struct {
	Claim       string   `json:"claim"`
	Ratio       *float64 `json:"ratio"`
	Reproduced  bool     `json:"reproduced"`
	Metric      string   `json:"metric"`
	Numerator   string   `json:"numerator"`
	Denominator string   `json:"denominator"`
	Threshold   string   `json:"threshold"`
	Why         string   `json:"why,omitempty"` // why there is no ratio
}

func (c Claim) threshold() string {
	if c.AtLeast > 0 {
		return fmt.Sprintf(">= %g", c.AtLeast)
	}
	return fmt.Sprintf("<= %g", c.AtMost)
}

// Evaluate measures c against rows. Rows whose figures are missing give no
// ratio and a claim that is not reproduced, never a guess.
func (c Claim) Evaluate(rows []*Row) ClaimResult {
	out := ClaimResult{Claim: c.Text, Metric: c.Metric, Numerator: c.Numerator, Denominator: c.Denominator, Threshold: c.threshold()}
	num, den := findRow(rows, c.Numerator), findRow(rows, c.Denominator)
	if num == nil || den == nil {
		out.Why = "a row of the claim was not measured"
		return out
	}
	a, b := num.Figure(c.Metric), den.Figure(c.Metric)
	if a == nil || b == nil || *b == 0 {
		out.Why = fmt.Sprintf("%s is missing or zero in a row of the claim", c.Metric)
		return out
	}
	ratio := *a / *b
	out.Ratio = &ratio
	if c.AtLeast > 0 {
		out.Reproduced = ratio >= c.AtLeast
	} else {
		out.Reproduced = ratio <= c.AtMost
	}
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

func findRow(rows []*Row, label string) *Row {
	for _, r := range rows {
		if r.Label == label {
			return r
		}
	}
	return nil
}

// Judge fills res's verdict from the experiment's claims.
func Judge(res *Result, claims []Claim) {
	res.Claims, res.Verdicts = nil, nil
	res.Reproduced = len(claims) > 0
	for i, c := range claims {
		cr := c.Evaluate(res.Rows)
		if i == 0 {
			res.Claim, res.Ratio = cr.Claim, cr.Ratio
		}
		res.Reproduced = res.Reproduced && cr.Reproduced
		res.Verdicts = append(res.Verdicts, cr)
	}
	if len(claims) > 1 { // the contract lists claims only when there are several
		res.Claims = res.Verdicts
	}
}
