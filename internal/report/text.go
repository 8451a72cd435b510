// Package report renders lab results: a terminal table per experiment with
// our figures beside the reference report's, the JSON of the CLI contract,
// and a self-contained HTML report with charts.
package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/highload-lab/hlab/internal/lab"
)

// WriteText writes res as a table: our figures, then the report's.
func WriteText(w io.Writer, res *lab.Result) error {
	fmt.Fprintf(w, "\n%s: %s\n", res.Name, res.Title)
	if len(res.Env) > 0 {
		fmt.Fprintf(w, "env: %s\n", envLine(res.Env))
	}
	cells := [][]string{{"setup", "rps", "min-max", "mean ms", "p50 ms", "p99 ms", "ok %", "cpu", "rss MB", "|", "report rps", "report mean ms"}}
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
			ok = lab.F(*r.SuccessRatio * 100)
		}
		cells = append(cells, []string{r.Label, num(r.RPS), spread, num(r.MeanMS), num(r.P50MS), num(r.P99MS),
			num(ok), num(r.CPUAvg), num(r.RSSMBAvg), "|", num(refRPS), num(refMean)})
	}
	if err := writeColumns(w, cells); err != nil {
		return err
	}
	for _, r := range res.Rows {
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
	for _, c := range res.Verdicts {
		verdict := "NOT REPRODUCED"
		if c.Reproduced {
			verdict = "REPRODUCED"
		}
		fmt.Fprintf(w, "claim: %s\n", c.Claim)
		if c.Ratio != nil {
			fmt.Fprintf(w, "  measured ratio %.2f", *c.Ratio)
			if c.Numerator != "" {
				fmt.Fprintf(w, " (%s: %q / %q, needs %s)", c.Metric, c.Numerator, c.Denominator, c.Threshold)
			}
			fmt.Fprintf(w, ": %s\n", verdict)
		} else {
			fmt.Fprintf(w, "  no ratio (%s): %s\n", c.Why, verdict)
		}
	}
	if res.Error != "" {
		fmt.Fprintf(w, "FAILED: %s\n", res.Error)
	}
	return nil
}

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
