// Package report renders lab results: a terminal table per experiment with
// our figures beside the reference report's, the JSON of the CLI contract,
// and a self-contained HTML report with charts.
package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/highload-lab/hlab/internal/labresult"
)

// WriteScoreboard writes one line per claim of every result (its
// verdict, ratio, interval, threshold and pairs, then the claim and the
// report's figure), one per target (its verdict, figure, spread and
// bound), and the report figures each experiment did not rerun with the
// reason: the summary a reader sees first.
func WriteScoreboard(w io.Writer, results []*labresult.Result) error {
	fmt.Fprintf(w, "\nScoreboard: each verdict reads the %.0f%% confidence interval of a ratio over pairs of runs measured back to back, against the claim's threshold (INVALID: an integrity gate failed).\n", labresult.Level*100)
	cells := [][]string{{"experiment", "verdict", "ratio", "interval", "needs", "pairs"}}
	var texts []string
	for _, res := range results {
		for i, c := range res.Claims {
			pairs := fmt.Sprint(c.Pairs)
			if c.NoisyPairs > 0 {
				pairs += fmt.Sprintf(" (%d noisy)", c.NoisyPairs)
			}
			cells = append(cells, []string{fmt.Sprintf("%s #%d", res.Name, i+1), c.Verdict.Word(), num(c.Ratio), ciText(c.CI), c.Threshold, pairs})
			text := claimText(res, i, c.Claim)
			if c.Report != "" {
				text += "; report: " + c.Report
			}
			if c.Verdict == labresult.Invalid && c.Why != "" {
				text += "; INVALID: " + c.Why
			}
			texts = append(texts, text)
		}
		if len(res.Claims) == 0 {
			cells = append(cells, []string{res.Name, labresult.VerdictWord(res), "", "", "", ""})
			texts = append(texts, res.Error)
		}
	}
	if err := writeWithTexts(w, cells, texts); err != nil {
		return err
	}
	if err := writeTargets(w, results); err != nil {
		return err
	}
	for _, res := range results {
		for _, n := range res.NotRerun {
			fmt.Fprintf(w, "  %s: not rerun: %s: %s\n", res.Name, n.Figure, n.Why)
		}
	}
	return nil
}

// claimText is a claim's text, the first one's marked as the report's
// setup with how many setup items of its rows differ from the report's.
func claimText(res *labresult.Result, i int, text string) string {
	if i != 0 {
		return text
	}
	if d := labresult.DifferencesText(res.Setup); d != "" {
		return "(report's setup; " + d + ") " + text
	}
	return "(report's setup) " + text
}

// writeTargets writes one line per target of every result, its text
// under it: the judgements of ours beside the report's claims.
func writeTargets(w io.Writer, results []*labresult.Result) error {
	cells := [][]string{{"target", "verdict", "value", "spread", "needs"}}
	var texts []string
	for _, res := range results {
		for _, t := range res.Targets {
			cells = append(cells, []string{res.Name + " " + string(t.Key), t.Verdict.Word(), num(t.Value) + unitText(t.Unit), ciText(t.Spread), t.Bound})
			text := t.Target
			if t.Why != "" {
				text += "; " + t.Why
			}
			texts = append(texts, text)
		}
	}
	if len(texts) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nTargets: our own bounds on a figure; the verdict reads the figure's spread over runs (or the %.0f%% interval of a ratio over pairs): HOLDS when all of it is within the bound, FAILS when none is, INCONCLUSIVE when it straddles or the figure is not evidence.\n", labresult.Level*100)
	return writeWithTexts(w, cells, texts)
}

// writeWithTexts writes cells as columns, each body row followed by its
// text, indented, when it has one.
func writeWithTexts(w io.Writer, cells [][]string, texts []string) error {
	var b strings.Builder
	if err := writeColumns(&b, cells); err != nil {
		return err
	}
	for i, line := range strings.SplitAfter(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if _, err := io.WriteString(w, strings.TrimSuffix(line, "\n")+"\n"); err != nil {
			return err
		}
		if i > 0 && texts[i-1] != "" {
			fmt.Fprintf(w, "    %s\n", texts[i-1])
		}
	}
	return nil
}

// unitText is a figure's unit as it follows the figure: "2.1x", "340 s".
func unitText(unit string) string {
	switch unit {
	case "", "x":
		return unit
	}
	return " " + unit
}

// targetLine is a target's or shown ratio's figures in a sentence.
func targetLine(t labresult.TargetResult) string {
	s := num(t.Value) + unitText(t.Unit)
	if t.Spread != nil {
		s += " " + ciText(t.Spread)
	}
	if t.Pairs > 0 {
		s += fmt.Sprintf(" over %d pairs", t.Pairs)
	}
	if t.Bound != "" {
		s = fmt.Sprintf("%s: %s, needs %s", t.Verdict.Word(), s, t.Bound)
	}
	if t.Why != "" {
		s += "; " + t.Why
	}
	return s
}

func ciText(ci []float64) string {
	if len(ci) != 2 {
		return "-"
	}
	return "[" + num(&ci[0]) + ", " + num(&ci[1]) + "]"
}

// WriteText writes res as a table, our figures then the report's, with
// each row's integrity failures and noise, and each claim's verdict with
// its interval and pairs.
func WriteText(w io.Writer, res *labresult.Result) error {
	fmt.Fprintf(w, "\n%s: %s\n", res.Name, res.Title)
	if len(res.Env) > 0 {
		fmt.Fprintf(w, "env: %s\n", envLine(res.Env))
	}
	if len(res.Setup) > 0 {
		fmt.Fprintf(w, "%s:\n", labresult.SetupLegend)
		for _, e := range res.Setup {
			fmt.Fprintf(w, "  %s\n", e.Line())
			if e.Why != "" {
				fmt.Fprintf(w, "      why: %s\n", e.Why)
			}
		}
	}
	cells := [][]string{{"setup", labresult.Title("rps"), "min-max", labresult.Title("mean_ms"), labresult.Title("p50_ms"), labresult.Title("p99_ms"),
		"ok %", labresult.Title("cpu_avg"), labresult.Title("rss_mb_avg"), "runs", "|", "report rps", "report mean ms"}}
	for _, r := range res.Rows {
		spread := ""
		if r.Runs > 1 && r.RPSMin != nil && r.RPSMax != nil {
			spread = num(r.RPSMin) + "-" + num(r.RPSMax)
		}
		var refRPS, refMean *float64
		if r.Ref != nil {
			refRPS, refMean = r.Ref.RPS, r.Ref.MeanMS
		}
		var ok *float64
		if r.SuccessRatio != nil {
			ok = labresult.F(*r.SuccessRatio * 100)
		}
		label := r.Label
		if r.Noisy {
			label += " [noisy]"
		}
		if r.GeneratorSaturated {
			label += " [generator saturated]"
		}
		if len(r.IntegrityFailures()) > 0 {
			label += " [INTEGRITY]"
		}
		cells = append(cells, []string{label, num(r.RPS), spread, num(r.MeanMS), num(r.P50MS), num(r.P99MS),
			num(ok), num(r.CPUAvg), num(r.RSSMBAvg), fmt.Sprint(r.Runs), "|", num(refRPS), num(refMean)})
	}
	if err := writeColumns(w, cells); err != nil {
		return err
	}
	fmt.Fprintln(w, "rps counts successful requests only; [noisy]: processes outside the lab used more than a tenth of a core during a run")
	for _, r := range res.Rows {
		for _, f := range r.IntegrityFailures() {
			fmt.Fprintf(w, "INTEGRITY: %q %s\n", r.Label, f)
		}
		if r.GeneratorSaturated && r.GeneratorCPU != nil && r.GeneratorCPUsAvailable != nil {
			fmt.Fprintf(w, "generator saturated: %q: the load generator may be the bottleneck: it used %s of its %s CPUs in a run\n",
				r.Label, cpus(r.GeneratorCPU), cpus(r.GeneratorCPUsAvailable))
		}
		if r.Noisy && r.OutsideCPU != nil {
			fmt.Fprintf(w, "noisy: %q: up to %.2f cores used outside the lab in a run (load average %s)\n", r.Label, *r.OutsideCPU, num(r.LoadAvg))
		}
		if len(r.Errors) > 0 {
			fmt.Fprintf(w, "errors in %q: %s\n", r.Label, countsLine(r.Errors))
		}
		if r.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Label, r.Note)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, t := range res.Targets {
		fmt.Fprintf(w, "target %s: %s\n  %s\n", t.Key, t.Target, targetLine(t))
	}
	for _, t := range res.Ratios {
		fmt.Fprintf(w, "ratio %s: %s: %s\n", t.Key, t.Target, targetLine(t))
	}
	for _, n := range res.NotRerun {
		fmt.Fprintf(w, "not rerun: %s: %s\n", n.Figure, n.Why)
	}
	for i, c := range res.Claims {
		fmt.Fprintf(w, "claim %d: %s\n", i+1, claimText(res, i, c.Claim))
		fmt.Fprintf(w, "  %s: %s\n", c.Verdict.Word(), claimDetail(c))
	}
	if res.Error != "" {
		fmt.Fprintf(w, "FAILED: %s\n", res.Error)
	}
	return nil
}

// claimDetail is a claim's figures in a sentence.
func claimDetail(c labresult.ClaimResult) string {
	var parts []string
	if c.Ratio != nil {
		s := fmt.Sprintf("ratio %.2f", *c.Ratio)
		if c.CI != nil {
			s += fmt.Sprintf(", %.0f%% interval [%.2f, %.2f]", c.CILevel*100, c.CI[0], c.CI[1])
		}
		parts = append(parts, s)
	}
	metric := c.Metric
	if c.DenMetric != "" {
		metric += " / " + c.DenMetric
	}
	parts = append(parts, fmt.Sprintf("needs %s (%s: %q / %q)", c.Threshold, metric, c.Numerator, c.Denominator))
	if c.Pairs > 0 {
		rs := make([]string, len(c.PairRatios))
		for i, r := range c.PairRatios {
			rs[i] = fmt.Sprintf("%.2f", r)
		}
		s := fmt.Sprintf("%d pairs: %s", c.Pairs, strings.Join(rs, " "))
		if c.NoisyPairs > 0 {
			s += fmt.Sprintf(" (%d with a noisy run)", c.NoisyPairs)
		}
		parts = append(parts, s)
	}
	if c.Report != "" {
		parts = append(parts, "report: "+c.Report)
	}
	if c.Why != "" {
		parts = append(parts, c.Why)
	}
	return strings.Join(parts, "; ")
}

// WriteColumns writes cells as aligned columns, the first left-aligned
// and the rest right-aligned: the lab's terminal tables.
func WriteColumns(w io.Writer, cells [][]string) error { return writeColumns(w, cells) }

// Num formats a figure as the lab's tables do: three significant digits
// or so, "-" when not measured.
func Num(v *float64) string { return num(v) }

// writeColumns writes cells as aligned columns: the first left-aligned,
// the rest right-aligned, as figures read best.
func writeColumns(w io.Writer, cells [][]string) error {
	var widths []int
	for _, row := range cells {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, row := range cells {
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// num formats a figure with sensible precision, "-" when not measured.
// cpus writes a CPU count with at most two decimals: 1, 0.97, 0.1.
func cpus(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(math.Round(*v*100)/100, 'f', -1, 64)
}

func num(v *float64) string {
	if v == nil {
		return "-"
	}
	x := *v
	switch {
	case x == 0:
		return "0"
	case x >= 100 || x <= -100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10 || x <= -10:
		return fmt.Sprintf("%.1f", x)
	case x >= 1 || x <= -1:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.3f", x)
	}
}

func envLine(env map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(env) {
		parts = append(parts, k+"="+env[k])
	}
	return strings.Join(parts, "; ")
}

func countsLine(m map[string]int64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
