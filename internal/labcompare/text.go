package labcompare

import (
	"fmt"
	"io"
	"strings"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/report"
)

// missing stands for a figure one run does not have: not measured (null)
// or not in that run at all. It is never replaced by a number.
const missing = "—"

// Summary counts what a comparison found, for its first lines.
type Summary struct {
	Claims, RowsBoth                           int
	ClaimsAdded, ClaimsRemoved                 int
	Targets, TargetsAdded, TargetsRemoved      int
	NotRerunAdded, NotRerunRemoved             int
	SetupAdded, SetupRemoved, SetupChanged     int
	RowsAdded, RowsRemoved                     int
	ExperimentsAdded, ExperimentsRemoved       int
	SpreadFigures, OutsideSpread, WithinSpread int
}

// Summarize counts c's claims, rows and figures read against a spread.
func (c *Comparison) Summarize() Summary {
	var s Summary
	for _, e := range c.Experiments {
		switch e.Presence {
		case Added:
			s.ExperimentsAdded++
		case Removed:
			s.ExperimentsRemoved++
		}
		for _, cl := range e.Claims {
			switch cl.Presence {
			case Both:
				s.Claims++
			case Added:
				s.ClaimsAdded++
			case Removed:
				s.ClaimsRemoved++
			}
		}
		for _, t := range e.Targets {
			count(t.Presence, &s.Targets, &s.TargetsAdded, &s.TargetsRemoved)
		}
		for _, n := range e.NotRerun {
			var both int
			count(n.Presence, &both, &s.NotRerunAdded, &s.NotRerunRemoved)
		}
		for _, st := range e.Setup {
			var both int
			count(st.Presence, &both, &s.SetupAdded, &s.SetupRemoved)
			if st.Changed {
				s.SetupChanged++
			}
		}
		for _, r := range e.Rows {
			switch r.Presence {
			case Both:
				s.RowsBoth++
			case Added:
				s.RowsAdded++
			case Removed:
				s.RowsRemoved++
			}
			for _, f := range r.Figures {
				switch f.Spread {
				case Within:
					s.SpreadFigures++
					s.WithinSpread++
				case Outside:
					s.SpreadFigures++
					s.OutsideSpread++
				}
			}
		}
	}
	return s
}

// count adds one to both, added or removed, by presence.
func count(p Presence, both, added, removed *int) {
	switch p {
	case Both:
		*both++
	case Added:
		*added++
	case Removed:
		*removed++
	}
}

// Beyond is a figure whose change lies outside its runs' spread.
type Beyond struct {
	Experiment, Label string
	Figure
}

func (x Beyond) String() string {
	return fmt.Sprintf("%s %q %s %s → %s (B/A %s)", x.Experiment, x.Label, FigureName(x.Key), fig(x.A), fig(x.B), fig(x.Change))
}

// OutsideSpread lists the figures that changed outside their spread, in
// the order shown.
func (c *Comparison) OutsideSpread() []Beyond {
	var out []Beyond
	for _, e := range c.Experiments {
		for _, r := range e.Rows {
			for _, f := range r.Figures {
				if f.Spread == Outside {
					out = append(out, Beyond{e.Name, r.Label, f})
				}
			}
		}
	}
	return out
}

// MovedLine is the summary's first line: how many verdicts moved, and
// which.
func (c *Comparison) MovedLine() string {
	if len(c.Moved) == 0 {
		s := c.Summarize()
		return fmt.Sprintf("No verdict moved (%d claims and %d targets in both runs).", s.Claims, s.Targets)
	}
	moves := make([]string, len(c.Moved))
	for i, m := range c.Moved {
		moves[i] = m.String()
	}
	return fmt.Sprintf("%s moved: %s", plural(len(c.Moved), "verdict"), strings.Join(moves, "; "))
}

// CountsLines says what was added, removed and changed beyond spread.
func (c *Comparison) CountsLines() []string {
	s := c.Summarize()
	var out []string
	var parts []string
	for _, p := range []struct {
		n          int
		what, verb string
	}{
		{s.ExperimentsAdded, "experiment", "added"}, {s.ExperimentsRemoved, "experiment", "removed"},
		{s.ClaimsAdded, "claim", "added"}, {s.ClaimsRemoved, "claim", "removed"},
		{s.TargetsAdded, "target", "added"}, {s.TargetsRemoved, "target", "removed"},
		{s.NotRerunAdded, "figure not rerun", "added"}, {s.NotRerunRemoved, "figure not rerun", "removed"},
		{s.SetupAdded, "setup item", "added"}, {s.SetupRemoved, "setup item", "removed"},
		{s.RowsAdded, "row", "added"}, {s.RowsRemoved, "row", "removed"},
	} {
		if p.n > 0 {
			parts = append(parts, plural(p.n, p.what)+" "+p.verb)
		}
	}
	if len(parts) > 0 {
		out = append(out, "Added (only in B) and removed (only in A): "+strings.Join(parts, ", ")+".")
	}
	if s.SetupChanged > 0 {
		out = append(out, fmt.Sprintf("Setup items run differently in B: %d.", s.SetupChanged))
	}
	if s.SpreadFigures > 0 {
		out = append(out, fmt.Sprintf("Figures with a run-to-run spread (over more than one run): %d of %d changed outside it, %d within (noise).",
			s.OutsideSpread, s.SpreadFigures, s.WithinSpread))
	}
	return out
}

// WriteText writes c for a terminal: verdict moves and counts first, then
// the environment's differences, then per experiment a table of claims
// and one of rows.
func WriteText(w io.Writer, c *Comparison) error {
	var b strings.Builder
	fmt.Fprintf(&b, "A = %s\nB = %s\n\n", c.A, c.B)
	b.WriteString(c.MovedLine() + "\n")
	for _, m := range c.Moved {
		fmt.Fprintf(&b, "  MOVED %s: %s\n", m, m.Claim)
	}
	for _, l := range c.CountsLines() {
		b.WriteString(l + "\n")
	}
	for _, x := range c.OutsideSpread() {
		fmt.Fprintf(&b, "  OUTSIDE spread: %s\n", x)
	}
	writeEnv(&b, c.Env)
	for _, e := range c.Experiments {
		if err := writeExperiment(&b, e); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeEnv(b *strings.Builder, env []EnvDiff) {
	if len(env) == 0 {
		b.WriteString("\nEnvironment: the same in both runs (machine, Go, quotas, dependencies).\n")
		return
	}
	fmt.Fprintf(b, "\nEnvironment differences (%d; they may explain changes in the figures):\n", len(env))
	for _, d := range env {
		scope := d.Experiment
		if scope == "" {
			scope = "machine"
		}
		a, bv := orMissing(d.A), orMissing(d.B)
		if len(a)+len(bv) <= 60 {
			fmt.Fprintf(b, "  %s: %s: %s → %s\n", scope, d.Key, a, bv)
			continue
		}
		fmt.Fprintf(b, "  %s: %s:\n    A: %s\n    B: %s\n", scope, d.Key, a, bv)
	}
}

func orMissing(s *string) string {
	if s == nil {
		return missing
	}
	return *s
}

func writeExperiment(b *strings.Builder, e Experiment) error {
	fmt.Fprintf(b, "\n%s: %s", e.Name, e.Title)
	switch e.Presence {
	case Added:
		b.WriteString("  [added: only in B]")
	case Removed:
		b.WriteString("  [removed: only in A]")
	}
	b.WriteString("\n")
	if e.ErrorA != "" {
		fmt.Fprintf(b, "FAILED in A: %s\n", e.ErrorA)
	}
	if e.ErrorB != "" {
		fmt.Fprintf(b, "FAILED in B: %s\n", e.ErrorB)
	}
	if len(e.Claims) > 0 {
		if err := writeClaims(b, e.Claims); err != nil {
			return err
		}
	}
	if len(e.Targets) > 0 {
		if err := writeTargets(b, e.Targets); err != nil {
			return err
		}
	}
	for _, n := range e.NotRerun {
		if n.Presence != Both {
			fmt.Fprintf(b, "  not rerun, %s: %s: %s\n", n.Presence, n.Figure, n.Why)
		}
	}
	for _, st := range e.Setup {
		switch {
		case st.Presence == Removed:
			fmt.Fprintf(b, "  setup, removed: %s\n", st.A.Line())
		case st.Presence == Added:
			fmt.Fprintf(b, "  setup, added: %s\n", st.B.Line())
		case st.Changed:
			fmt.Fprintf(b, "  setup, changed: A %s\n                   B %s\n", st.A.Line(), st.B.Line())
		}
	}
	if len(e.Rows) > 0 {
		return writeRows(b, e.Rows)
	}
	return nil
}

func writeTargets(b *strings.Builder, targets []Target) error {
	cells := [][]string{{"  target", "verdict A → B", "A", "B", "needs"}}
	after := map[int][]string{}
	for _, t := range targets {
		bound := ""
		if t.B != nil {
			bound = t.B.Bound
		} else if t.A != nil {
			bound = t.A.Bound
		}
		after[len(cells)] = []string{"      " + t.Target}
		cells = append(cells, []string{"  " + t.Key, targetVerdictCell(t), targetSide(t.A), targetSide(t.B), bound})
	}
	return table(b, cells, nil, after)
}

// targetVerdictCell marks a moved verdict and a target in one run only.
func targetVerdictCell(t Target) string {
	switch {
	case t.Presence == Added:
		return "added: " + t.B.Verdict.Word()
	case t.Presence == Removed:
		return "removed: " + t.A.Verdict.Word()
	case t.Moved:
		return "MOVED " + t.A.Verdict.Word() + " → " + t.B.Verdict.Word()
	}
	return t.B.Verdict.Word()
}

// targetSide is a target's figure in one run, with its spread.
func targetSide(t *labresult.TargetResult) string {
	if t == nil {
		return missing
	}
	s := fig(t.Value)
	if len(t.Spread) == 2 {
		s += " " + rangeText(t.Spread)
	}
	return s
}

func writeClaims(b *strings.Builder, claims []Claim) error {
	cells := [][]string{{"  claim", "verdict A → B", "ratio A", "interval A", "pairs", "ratio B", "interval B", "pairs", "B/A", "B−A", "intervals"}}
	after := map[int][]string{}
	for _, c := range claims {
		row := []string{fmt.Sprintf("  #%d", c.Index), verdictCell(c)}
		row = append(row, sideCells(c.A)...)
		row = append(row, sideCells(c.B)...)
		overlap := ""
		if c.Overlap != nil {
			overlap = "disjoint"
			if *c.Overlap {
				overlap = "overlap"
			}
		}
		row = append(row, fig(c.Change), fig(c.Diff), overlap)
		after[len(cells)] = []string{"      " + c.Claim}
		cells = append(cells, row)
	}
	return table(b, cells, nil, after)
}

// verdictCell marks a moved verdict and a claim in one run only.
func verdictCell(c Claim) string {
	switch {
	case c.Presence == Added:
		return "added: " + c.B.Verdict.Word()
	case c.Presence == Removed:
		return "removed: " + c.A.Verdict.Word()
	case c.Moved:
		return "MOVED " + c.A.Verdict.Word() + " → " + c.B.Verdict.Word()
	}
	return c.B.Verdict.Word()
}

func sideCells(s *labresult.ClaimResult) []string {
	if s == nil {
		return []string{missing, missing, missing}
	}
	ci := missing
	if len(s.CI) == 2 {
		ci = "[" + report.Num(&s.CI[0]) + ", " + report.Num(&s.CI[1]) + "]"
	}
	return []string{fig(s.Ratio), ci, fmt.Sprint(s.Pairs)}
}

func writeRows(b *strings.Builder, rows []Row) error {
	cells := [][]string{{"  row / figure", "A", "B", "B/A", "spread", "A min–max", "B min–max"}}
	before := map[int][]string{}
	for _, r := range rows {
		head := "  " + r.Label + "  " + runsText(r)
		if len(r.Figures) == 0 {
			head += "  (no figures in either run)"
		}
		before[len(cells)] = append(before[len(cells)], head)
		for _, f := range r.Figures {
			cells = append(cells, []string{"    " + FigureName(f.Key), fig(f.A), fig(f.B), fig(f.Change), spreadText(f.Spread), rangeText(f.RangeA), rangeText(f.RangeB)})
		}
	}
	// A trailing row without figures has no cell line to precede.
	return table(b, cells, before, nil)
}

func runsText(r Row) string {
	switch r.Presence {
	case Added:
		return fmt.Sprintf("[added: only in B; %s]", plural(r.RunsB, "run"))
	case Removed:
		return fmt.Sprintf("[removed: only in A; %s]", plural(r.RunsA, "run"))
	}
	return fmt.Sprintf("(runs %d / %d)", r.RunsA, r.RunsB)
}

func spreadText(s Spread) string {
	switch s {
	case Within:
		return "within spread"
	case Outside:
		return "OUTSIDE spread"
	}
	return ""
}

func rangeText(r []float64) string {
	if r == nil {
		return ""
	}
	return report.Num(&r[0]) + "–" + report.Num(&r[1])
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// fig formats a figure as the lab's tables do, "—" when missing.
func fig(v *float64) string {
	if v == nil {
		return missing
	}
	return report.Num(v)
}

// table writes cells aligned with report.WriteColumns, with whole lines
// (not aligned) before or after some of them, by index in cells.
func table(b *strings.Builder, cells [][]string, before, after map[int][]string) error {
	var t strings.Builder
	if err := report.WriteColumns(&t, cells); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(t.String(), "\n"), "\n")
	for i, l := range lines {
		for _, x := range before[i] {
			b.WriteString(x + "\n")
		}
		b.WriteString(strings.TrimRight(l, " ") + "\n")
		for _, x := range after[i] {
			b.WriteString(x + "\n")
		}
	}
	for i := len(lines); i <= len(lines)+1; i++ {
		for _, x := range before[i] {
			b.WriteString(x + "\n")
		}
	}
	return nil
}
