package labresult

import (
	"fmt"
	"strings"
)

// Result is what one experiment measured and concluded: the JSON
// contract's "experiments" entry.
type Result struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Claim, Ratio, Verdict and Reproduced mirror the first claim: the
	// report's own setup.
	Claim      string   `json:"claim"`
	Ratio      *float64 `json:"ratio"`
	Verdict    Verdict  `json:"verdict"`
	Reproduced bool     `json:"reproduced"`
	// Claims lists every claim's verdict, the first one's included.
	Claims []ClaimResult `json:"claims"`
	// Targets are our own judgements, each a figure against a bound;
	// Ratios the ratios shown beside the rows, judged against nothing.
	Targets []TargetResult    `json:"targets,omitempty"`
	Ratios  []TargetResult    `json:"ratios,omitempty"`
	Env     map[string]string `json:"env"`
	Rows    []*Row            `json:"rows"`
	// Metrics declares the experiment's own figures that its rows carry
	// (Row.Figures): unit, direction, meaning.
	Metrics []Metric `json:"metrics,omitempty"`
	// Setup sets the experiment's setup beside the report's, item by
	// item, with why ours differs where it does.
	Setup []Setup  `json:"setup,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// NotRerun lists the report's figures this run did not rerun, each
	// with its reason, so that nothing is skipped silently.
	NotRerun []NotRerun `json:"not_rerun,omitempty"`
	Error    string     `json:"error,omitempty"`
	// Mode is how long the experiment ran: "quick" or "full".
	Mode    string  `json:"mode"`
	Seconds float64 `json:"seconds"`
}

// NotRerun is a figure of the report the experiment does not rerun here.
type NotRerun struct {
	Figure string `json:"figure"`
	Why    string `json:"why"`
}

// Machine describes where the lab ran.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUQuota string `json:"cpu_quota"` // sandbox mechanism: cgroup-v1, cgroup-v2 or none
	Go       string `json:"go"`
	OS       string `json:"os"`
	CPUModel string `json:"cpu_model,omitempty"`
	Kernel   string `json:"kernel,omitempty"`
}

// Row returns the row with key k, nil when not measured.
func (res *Result) Row(k Key) *Row {
	for _, r := range res.Rows {
		if r.Key == k {
			return r
		}
	}
	return nil
}

// Judge fills res's verdicts from the experiment's claims and targets. A
// claim of an experiment that failed is INVALID whatever its rows say: a
// run that did not finish is not evidence. The result's top-level claim,
// ratio, verdict and reproduced mirror the first claim.
func Judge(res *Result, claims []Claim, targets []Target) {
	res.Claims, res.Targets, res.Ratios = nil, nil, nil
	for _, c := range claims {
		cr := c.Evaluate(res.Rows)
		if res.Error != "" && cr.Verdict != Invalid {
			cr.Verdict, cr.Reproduced = Invalid, false
			cr.Why = "the experiment did not finish: " + res.Error
		}
		res.Claims = append(res.Claims, cr)
	}
	for _, t := range targets {
		tr := t.Evaluate(res.Rows)
		if t.Bound.IsZero() {
			res.Ratios = append(res.Ratios, tr)
			continue
		}
		if res.Error != "" && tr.Verdict != Undecided {
			tr.Verdict = Undecided
			tr.Why = "the experiment did not finish: " + res.Error
		}
		res.Targets = append(res.Targets, tr)
	}
	res.Claim, res.Ratio, res.Verdict, res.Reproduced = "", nil, Invalid, false
	if len(res.Claims) > 0 {
		first := res.Claims[0]
		res.Claim, res.Ratio, res.Verdict, res.Reproduced = first.Claim, first.Ratio, first.Verdict, first.Reproduced
	}
}

// VerdictWord is the word printed for res: FAILED when the experiment did
// not finish, else its first claim's verdict (REPRODUCED, NOT REPRODUCED,
// INCONCLUSIVE or INVALID).
func VerdictWord(res *Result) string {
	if res.Error != "" {
		return "FAILED"
	}
	return res.Verdict.Word()
}

// Summary is one line of every claim's verdict and every target's.
func Summary(res *Result) string {
	var parts []string
	for _, c := range res.Claims {
		s := c.Verdict.Word()
		if c.CI != nil {
			s += fmt.Sprintf(" %.2f [%.2f, %.2f]", *c.Ratio, c.CI[0], c.CI[1])
		} else if c.Ratio != nil {
			s += fmt.Sprintf(" %.2f", *c.Ratio)
		}
		parts = append(parts, s)
	}
	held := 0
	for _, t := range res.Targets {
		if t.Verdict == Holds {
			held++
		}
	}
	if len(res.Targets) > 0 {
		parts = append(parts, fmt.Sprintf("targets: %d of %d hold", held, len(res.Targets)))
	}
	if len(parts) == 0 {
		return "no claims"
	}
	return strings.Join(parts, "; ")
}
