package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/highload-lab/hlab/internal/labresult"
)

// ChartLine is one line of the verdicts' chart: a claim, and its result
// in each run the chart draws.
type ChartLine struct {
	// Experiment names the experiment; the line's label links to its
	// section (#name).
	Experiment string
	// Label labels the line: the experiment and the claim's number.
	Label string
	// Claim is the claim's text, shown on hover.
	Claim string
	// Runs holds the claim's result in each run, in the chart's order; nil
	// where the claim is not in that run.
	Runs []*labresult.ClaimResult
	// Absent is what a run with no result says ("not in this run" when
	// empty): an experiment that judged no claim says why. Failed draws
	// it in the colour of a failure.
	Absent string
	Failed bool
	// Marked sets the label in bold: a verdict that moved between runs.
	Marked bool
}

// The chart's geometry, in pixels: the whole width, the labels' column,
// the gap between runs, the figures' column of each run, one line's
// height, and the height of the legend, the runs' titles and the axis.
const (
	chartW      = 1060
	chartLabelW = 130
	chartGap    = 18
	chartValueW = 130
	chartLineH  = 22
	chartLegend = 24
	chartTitle  = 18
	chartAxis   = 18
	// charW is about the width of a lower-case character of the charts'
	// 11px font.
	charW = 6.2
)

// VerdictChart draws every line's claim on one log axis of the ratio:
// its value as a point, its confidence interval as a bar and its
// threshold as a tick with the side that passes shaded, coloured by
// verdict (the classes of Style), with the report's own figure as a
// hollow diamond. Each run in runs gets a panel of its own, side by side
// and on the same axis; a single run needs no title (runs nil). The
// result is an inline SVG for pages that carry Style.
func VerdictChart(runs []string, lines []ChartLine) template.HTML {
	panels := max(len(runs), 1)
	top := chartLegend + chartAxis
	if len(runs) > 0 {
		top += chartTitle
	}
	h := top + len(lines)*chartLineH + 2*chartAxis
	plotW := float64(chartW-chartLabelW-(panels-1)*chartGap)/float64(panels) - chartValueW
	ax := newLogAxis(lines, plotW)

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="verdicts" width="%d" height="%d" viewBox="0 0 %d %d" style="max-width:100%%;height:auto" role="img" aria-label="every claim's ratio, interval and threshold, by verdict">`, chartW, h, chartW, h)
	chartLegendRow(&b)
	panelX := func(p int) float64 { return chartLabelW + float64(p)*(plotW+chartValueW+chartGap) }
	for p := range panels {
		x0 := panelX(p)
		if len(runs) > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-weight="bold">%s</text>`, x0, chartLegend+chartTitle-5, html.EscapeString(shorten(runs[p], chars(plotW+chartValueW))))
		}
		ax.draw(&b, x0, top, len(lines))
	}
	for i, l := range lines {
		y := float64(top + i*chartLineH)
		if i > 0 && l.Experiment != lines[i-1].Experiment {
			fmt.Fprintf(&b, `<line x1="0" x2="%d" y1="%.1f" y2="%.1f" stroke="#ccc"/>`, chartW, y, y)
		}
		weight := ""
		if l.Marked {
			weight = ` font-weight="bold"`
		}
		fmt.Fprintf(&b, `<g class="line"><a href="#%s"><text x="%d" y="%.1f" text-anchor="end"%s>%s<title>%s</title></text></a>`,
			html.EscapeString(l.Experiment), chartLabelW-8, y+chartLineH/2+4, weight, html.EscapeString(shorten(l.Label, chars(chartLabelW-8))), html.EscapeString(l.Claim))
		for p := range panels {
			var c *labresult.ClaimResult
			if p < len(l.Runs) {
				c = l.Runs[p]
			}
			chartClaim(&b, ax, panelX(p), y, l, c)
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// chartLegendRow explains the colours and the marks in one row.
func chartLegendRow(b *strings.Builder) {
	x := 0.0
	for _, v := range []labresult.Verdict{labresult.Reproduced, labresult.NotReproduced, labresult.Inconclusive, labresult.Invalid} {
		fmt.Fprintf(b, `<g class="%s"><rect x="%.1f" y="6" width="18" height="6" rx="3" fill="currentColor" opacity=".45"/><circle cx="%.1f" cy="9" r="4.5" fill="currentColor"/><text x="%.1f" y="13" fill="currentColor" font-weight="bold">%s</text></g>`,
			VerdictClass(string(v)), x, x+9, x+23, v.Word())
		x += 23 + textW(v.Word(), true) + 14
	}
	interval := fmt.Sprintf("ratio, %.0f%% interval", labresult.Level*100)
	fmt.Fprintf(b, `<rect x="%.1f" y="6" width="18" height="6" rx="3" fill="#555" opacity=".45"/><circle cx="%.1f" cy="9" r="4.5" fill="#555"/><text x="%.1f" y="13">%s</text>`, x, x+9, x+23, interval)
	x += 23 + textW(interval, false) + 14
	const threshold = "threshold, shaded on the side that passes"
	fmt.Fprintf(b, `<rect class="reproduced" x="%.1f" y="1" width="14" height="16" fill="currentColor" opacity=".12"/><line x1="%.1f" x2="%.1f" y1="1" y2="17" stroke="#222" stroke-width="2"/><text x="%.1f" y="13">%s</text>`, x, x, x, x+19, threshold)
	x += 19 + textW(threshold, false) + 14
	fmt.Fprintf(b, `%s<text x="%.1f" y="13">the report's figure</text>`, diamond(x+5, 9), x+15)
}

// textW is about how wide s is in the charts' 11px font: enough to keep
// texts from running into each other.
func textW(s string, bold bool) float64 {
	w := 0.0
	for _, r := range s {
		if unicode.IsUpper(r) {
			w += 7.4
		} else {
			w += charW
		}
	}
	if bold {
		w *= 1.08
	}
	return w
}

// chartClaim draws one claim's line in one run's panel at x0, its top at
// y: the threshold, the interval, the ratio and the report's figure, or
// a sentence where there is no ratio; and its figures in the column to
// the right.
func chartClaim(b *strings.Builder, ax logAxis, x0, y float64, l ChartLine, c *labresult.ClaimResult) {
	cy := y + chartLineH/2
	textY := cy + 4
	valueX := x0 + ax.w + 8
	if c == nil {
		absent := l.Absent
		if absent == "" {
			absent = "not in this run"
		}
		color := `fill="#777"`
		if l.Failed {
			color = `class="failed" fill="currentColor"`
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" %s font-style="italic">%s<title>%s</title></text>`,
			x0+4, textY, color, html.EscapeString(shorten(absent, chars(ax.w))), html.EscapeString(absent))
		return
	}
	fmt.Fprintf(b, `<g class="claim %s"><title>%s</title>`, VerdictClass(string(c.Verdict)), html.EscapeString(chartTip(l, c)))
	op, th, hasTh := parseThreshold(c.Threshold)
	if hasTh {
		tx := x0 + ax.x(th)
		from, to := tx, x0+ax.w
		if op == "<=" {
			from, to = x0, tx
		}
		fmt.Fprintf(b, `<rect class="reproduced" x="%.1f" y="%.1f" width="%.1f" height="%d" fill="currentColor" opacity=".12"/>`, from, y+2, to-from, chartLineH-4)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#222" stroke-width="2"/>`, tx, tx, y+3, y+chartLineH-3)
	}
	if len(c.CI) == 2 {
		lo, hi := x0+ax.x(c.CI[0]), x0+ax.x(c.CI[1])
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="6" rx="3" fill="currentColor" opacity=".45"/>`, lo, cy-3, math.Max(hi-lo, 1))
	}
	if c.Ratio != nil {
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4.5" fill="currentColor" stroke="#fff" stroke-width="1"/>`, x0+ax.x(*c.Ratio), cy)
	} else {
		why := c.Verdict.Word()
		if c.Why != "" {
			why += ": " + c.Why
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="currentColor" font-style="italic">%s</text>`, x0+4, textY, html.EscapeString(shorten(why, chars(ax.w))))
	}
	if c.ReportRatio > 0 {
		b.WriteString(diamond(x0+ax.x(c.ReportRatio), cy))
	}
	needs := ""
	if c.Threshold != "" {
		needs = "needs " + thresholdText(c.Threshold)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f"><tspan fill="currentColor" font-weight="bold">%s</tspan> <tspan fill="#666">%s</tspan></text></g>`, valueX, textY, num(c.Ratio), needs)
}

// chars is how many characters fit in w pixels.
func chars(w float64) int { return int(w / charW) }

// diamond is the mark of the report's own figure.
func diamond(x, y float64) string {
	return fmt.Sprintf(`<path d="M%.1f %.1fl5 5l-5 5l-5 -5z" fill="none" stroke="#000" stroke-width="1.5"/>`, x, y-5)
}

// chartTip is what a line says on hover: the claim, its verdict and its
// figures.
func chartTip(l ChartLine, c *labresult.ClaimResult) string {
	s := fmt.Sprintf("%s: %s: %s", l.Label, c.Verdict.Word(), claimDetail(*c))
	if c.Why != "" {
		s += "; " + c.Why
	}
	if margin, ok := clearance(c); ok && margin >= 1 {
		s += fmt.Sprintf("; clears the threshold by %.2fx", margin)
	} else if ok {
		s += fmt.Sprintf("; misses the threshold by %.2fx", 1/margin)
	}
	return s + "\n" + l.Claim
}

// clearance is how many times over its threshold a claim's ratio is on
// the side that passes: above 1 clears, below 1 misses.
func clearance(c *labresult.ClaimResult) (float64, bool) {
	op, th, ok := parseThreshold(c.Threshold)
	if !ok || c.Ratio == nil || *c.Ratio <= 0 {
		return 0, false
	}
	if op == "<=" {
		return th / *c.Ratio, true
	}
	return *c.Ratio / th, true
}

// parseThreshold reads a claim's threshold as labresult.Bound writes it
// (">= 2", "<= 0.75").
func parseThreshold(s string) (op string, v float64, ok bool) {
	op, val, found := strings.Cut(strings.TrimSpace(s), " ")
	if !found || (op != ">=" && op != "<=") {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return "", 0, false
	}
	return op, v, true
}

// thresholdText is a threshold as the chart prints it: "≥ 2".
func thresholdText(s string) string {
	return strings.NewReplacer(">=", "≥", "<=", "≤").Replace(s)
}

// logAxis maps ratios to x on a log scale w pixels wide, with ticks of
// the 1-2-5 series.
type logAxis struct {
	ticks  []tick
	lo, hi float64 // log10 of the ends
	w      float64
}

// newLogAxis spans every ratio, interval, threshold and report figure of
// lines, and 1, with a margin so that no mark sits on an end.
func newLogAxis(lines []ChartLine, w float64) logAxis {
	lo, hi := 1.0, 1.0
	see := func(v float64) {
		if v > 0 && !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, l := range lines {
		for _, c := range l.Runs {
			if c == nil {
				continue
			}
			if c.Ratio != nil {
				see(*c.Ratio)
			}
			for _, v := range c.CI {
				see(v)
			}
			see(c.ReportRatio)
			if _, th, ok := parseThreshold(c.Threshold); ok {
				see(th)
			}
		}
	}
	const margin = 1.15
	lo, hi = lo/margin, hi*margin
	return logAxis{ticks: series(lo, hi), lo: math.Log10(lo), hi: math.Log10(hi), w: w}
}

// x is v's offset from the axis's left end, v clamped to the axis.
func (a logAxis) x(v float64) float64 {
	if v <= 0 {
		return 0
	}
	f := (math.Log10(v) - a.lo) / (a.hi - a.lo)
	return math.Max(0, math.Min(1, f)) * a.w
}

// tick is m·10^e, a tick of the 1-2-5 series.
type tick struct {
	m float64 // 1, 2 or 5
	e int
}

func (t tick) value() float64 { return t.m * math.Pow(10, float64(t.e)) }

// String is the tick's value with as many decimals as it needs: "0.05",
// "20".
func (t tick) String() string { return strconv.FormatFloat(t.value(), 'f', max(-t.e, 0), 64) }

// series is the ticks of the 1-2-5 series from lo to hi (0 < lo < hi).
func series(lo, hi float64) []tick {
	const eps = 1e-9
	var out []tick
	for e := int(math.Floor(math.Log10(lo))); float64(e) <= math.Log10(hi); e++ {
		for _, m := range []float64{1, 2, 5} {
			if t := (tick{m, e}); t.value() >= lo*(1-eps) && t.value() <= hi*(1+eps) {
				out = append(out, t)
			}
		}
	}
	return out
}

// draw draws the axis of a panel at x0 for n lines under top: a grid
// line per tick (1, parity, darker), and the ticks' values above and
// under the lines.
func (a logAxis) draw(b *strings.Builder, x0 float64, top, n int) {
	bottom := top + n*chartLineH
	// 2 and 5 are labelled when their values fit between 1 and 2 (the
	// narrowest step).
	widest := 0.0
	for _, t := range a.ticks {
		if t.m != 1 {
			widest = math.Max(widest, textW(t.String(), false))
		}
	}
	labelAll := math.Log10(2)*a.w/(a.hi-a.lo) >= widest+4
	for _, t := range a.ticks {
		x := x0 + a.x(t.value())
		power := t.m == 1
		stroke := "#eee"
		switch {
		case power && t.e == 0:
			stroke = "#999"
		case power:
			stroke = "#ddd"
		}
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s"/>`, x, x, top, bottom, stroke)
		if power || labelAll {
			label := t.String()
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text><text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`, x, top-5, label, x, bottom+13, label)
		}
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">ratio, log scale (1: the two figures equal)</text>`, x0+a.w/2, bottom+2*chartAxis-4)
}

// chartLines is the chart's lines for every claim of results, one run;
// an experiment that judged no claim gets a line that says why.
func chartLines(results []*labresult.Result) []ChartLine {
	var out []ChartLine
	for _, res := range results {
		for i := range res.Claims {
			c := &res.Claims[i]
			out = append(out, ChartLine{Experiment: res.Name, Label: fmt.Sprintf("%s #%d", res.Name, i+1), Claim: c.Claim, Runs: []*labresult.ClaimResult{c}})
		}
		if len(res.Claims) == 0 {
			out = append(out, ChartLine{Experiment: res.Name, Label: res.Name, Runs: []*labresult.ClaimResult{nil}, Absent: NoClaims(res.Error), Failed: res.Error != ""})
		}
	}
	return out
}

// NoClaims is what the chart says of an experiment that judged no claim,
// given its error.
func NoClaims(err string) string {
	if err != "" {
		return "FAILED: " + err
	}
	return "no claims"
}
