package report

import (
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/labresult"
)

// judged is a claim's result as the lab writes it, for the chart's
// tests: ci and report optional (nil, 0).
func judged(text string, v labresult.Verdict, ratio *float64, ci []float64, threshold string, report float64, why string) labresult.ClaimResult {
	return labresult.ClaimResult{Claim: text, Verdict: v, Reproduced: v == labresult.Reproduced, Ratio: ratio, CI: ci, CILevel: labresult.Level,
		Pairs: 3, Metric: "rps", Threshold: threshold, ReportRatio: report, Why: why}
}

// chartResults are experiments whose claims take every verdict, both
// kinds of threshold, ratios from 0.1 to 100, a report's figure, no
// interval, no ratio, and an experiment that judged none.
func chartResults() []*labresult.Result {
	f := labresult.F
	iv := func(lo, hi float64) []float64 { return []float64{lo, hi} }
	return []*labresult.Result{
		{Name: "scale", Claims: []labresult.ClaimResult{
			judged("three replicas serve >= 2x one", labresult.Reproduced, f(2.54), iv(2.31, 2.79), ">= 2", 450.0/169, ""),
			judged("at 3 connections, three replicas serve >= 2x one", labresult.NotReproduced, f(1.4), iv(1.2, 1.6), ">= 2", 325.0/74, ""),
		}},
		{Name: "crud", Claims: []labresult.ClaimResult{
			judged("all optimizations serve >= 5x none", labresult.Reproduced, f(80), iv(60, 100), ">= 5", 0, ""),
		}},
		{Name: "timeouts", Claims: []labresult.ClaimResult{
			judged("a timeout cuts the heap to <= 0.75x", labresult.Reproduced, f(0.44), iv(0.36, 0.53), "<= 0.75", 0, ""),
			judged("a timeout cuts p99 to <= 0.75x", labresult.Inconclusive, f(0.7), iv(0.5, 0.9), "<= 0.75", 0, ""),
		}},
		{Name: "databus", Claims: []labresult.ClaimResult{
			judged("aggregation cuts produce requests to <= 1x", labresult.Reproduced, f(0.12), iv(0.1, 0.15), "<= 1", 0, ""),
		}},
		{Name: "async", Claims: []labresult.ClaimResult{
			judged("buffered serves >= 2x sync", labresult.Inconclusive, f(1.73), nil, ">= 2", 0, "1 pair(s) of runs: no confidence interval without at least 2"),
			judged("acknowledged serves >= 2x sync", labresult.Invalid, f(2.2), iv(2.0, 2.4), ">= 2", 0, "integrity: lost 3 acknowledged messages or writes"),
			judged("at 3 connections, acknowledged serves >= 2x sync", labresult.Invalid, nil, nil, ">= 2", 0, "not measured: async/sync-c3"),
		}},
		{Name: "caching", Error: "redis did not start within 30 s"},
	}
}

func TestVerdictChartGolden(t *testing.T) {
	golden(t, "verdicts.svg", []byte(VerdictChart(nil, chartLines(chartResults()))+"\n"))
}

// svgNode is an element of the chart, read back for the tests.
type svgNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []svgNode  `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n svgNode) num(t *testing.T, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(n.attr(name), 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", n.XMLName.Local, name, n.attr(name), err)
	}
	return v
}

// text is all the text under n.
func (n svgNode) text() string {
	s := n.Text
	for _, c := range n.Nodes {
		s += c.text()
	}
	return s
}

// find lists the elements under n (n included) that match.
func (n svgNode) find(match func(svgNode) bool) []svgNode {
	var out []svgNode
	if match(n) {
		out = append(out, n)
	}
	for _, c := range n.Nodes {
		out = append(out, c.find(match)...)
	}
	return out
}

func hasClass(class string) func(svgNode) bool {
	return func(n svgNode) bool { return strings.Contains(" "+n.attr("class")+" ", " "+class+" ") }
}

func parseChart(t *testing.T, svg string) svgNode {
	t.Helper()
	var root svgNode
	if err := xml.Unmarshal([]byte(svg), &root); err != nil {
		t.Fatalf("the chart is not well-formed SVG: %v", err)
	}
	return root
}

// TestVerdictChartEveryClaim: every claim of every experiment has its
// line, in the scoreboard's order, labelled with the experiment and the
// claim's number and coloured by its verdict; an experiment that judged
// no claim has a line that says why.
func TestVerdictChartEveryClaim(t *testing.T) {
	results := chartResults()
	lines := parseChart(t, string(VerdictChart(nil, chartLines(results)))).find(hasClass("line"))
	var want []string
	for _, res := range results {
		for i, c := range res.Claims {
			want = append(want, fmt.Sprintf("%s #%d %s", res.Name, i+1, VerdictClass(string(c.Verdict))))
		}
		if len(res.Claims) == 0 {
			want = append(want, res.Name+" FAILED: "+res.Error)
		}
	}
	var got []string
	for _, l := range lines {
		label := l.find(func(n svgNode) bool { return n.XMLName.Local == "a" })[0].Nodes[0].Text
		if claims := l.find(hasClass("claim")); len(claims) == 1 {
			got = append(got, label+" "+strings.TrimPrefix(claims[0].attr("class"), "claim "))
		} else {
			got = append(got, label+" "+strings.TrimSpace(l.Nodes[1].Text))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the chart's lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestVerdictChartGeometry: on each line the ratio lies within its
// interval's bar, the shading starts at the threshold's tick and runs to
// the side that passes, a claim that clears its threshold is drawn on
// the shaded side, and the axis spans every figure (0.1 to 100 here).
func TestVerdictChartGeometry(t *testing.T) {
	results := chartResults()
	root := parseChart(t, string(VerdictChart(nil, chartLines(results))))
	var claims []labresult.ClaimResult
	for _, res := range results {
		claims = append(claims, res.Claims...)
	}
	groups := root.find(hasClass("claim"))
	if len(groups) != len(claims) {
		t.Fatalf("%d claims drawn, want %d", len(groups), len(claims))
	}
	for i, g := range groups {
		c := claims[i]
		by := func(name string) []svgNode {
			return g.find(func(n svgNode) bool { return n.XMLName.Local == name && n.attr("class") != "reproduced" })
		}
		shade := g.find(func(n svgNode) bool { return n.XMLName.Local == "rect" && n.attr("class") == "reproduced" })
		tick := by("line")
		if len(shade) != 1 || len(tick) != 1 {
			t.Fatalf("%s: %d shadings and %d ticks, want one of each", c.Claim, len(shade), len(tick))
		}
		tx, sx, sw := tick[0].num(t, "x1"), shade[0].num(t, "x"), shade[0].num(t, "width")
		if op, _, _ := parseThreshold(c.Threshold); (op == ">=" && math.Abs(sx-tx) > 0.11) || (op == "<=" && math.Abs(sx+sw-tx) > 0.11) {
			t.Errorf("%s: the shading [%.1f, %.1f] does not start at the threshold's tick %.1f on the side that passes (%s)", c.Claim, sx, sx+sw, tx, c.Threshold)
		}
		dots := by("circle")
		if c.Ratio == nil {
			if len(dots) != 0 || !strings.Contains(g.text(), "INVALID: "+c.Why) {
				t.Errorf("%s: no ratio, yet %d points, or no sentence saying why:\n%s", c.Claim, len(dots), g.text())
			}
			continue
		}
		if len(dots) != 1 {
			t.Fatalf("%s: %d points", c.Claim, len(dots))
		}
		cx := dots[0].num(t, "cx")
		if in := cx >= sx && cx <= sx+sw; c.Verdict == labresult.Reproduced && !in {
			t.Errorf("%s: reproduced, yet its ratio (x %.1f) is off the side that passes [%.1f, %.1f]", c.Claim, cx, sx, sx+sw)
		}
		if c.Verdict == labresult.NotReproduced && cx >= sx && cx <= sx+sw {
			t.Errorf("%s: not reproduced, yet its ratio (x %.1f) is on the side that passes", c.Claim, cx)
		}
		bars := by("rect")
		if c.CI == nil {
			if len(bars) != 0 {
				t.Errorf("%s: no interval, yet a bar", c.Claim)
			}
		} else if len(bars) != 1 || cx < bars[0].num(t, "x") || cx > bars[0].num(t, "x")+bars[0].num(t, "width") {
			t.Errorf("%s: the ratio (x %.1f) is not on its interval's bar", c.Claim, cx)
		}
		if marks := by("path"); (c.ReportRatio > 0) != (len(marks) == 1) {
			t.Errorf("%s: report's figure %g, %d marks", c.Claim, c.ReportRatio, len(marks))
		}
	}
	var ticks []string
	for _, n := range root.find(func(n svgNode) bool { return n.XMLName.Local == "text" && n.attr("text-anchor") == "middle" }) {
		ticks = append(ticks, n.Text)
	}
	if axis := strings.Join(ticks, " "); axis != "0.1 0.1 0.2 0.2 0.5 0.5 1 1 2 2 5 5 10 10 20 20 50 50 100 100 ratio, log scale (1: the two figures equal)" {
		t.Errorf("the axis's ticks, top and bottom: %s", axis)
	}
}

// TestWriteHTMLChartFirst: the page opens with the chart, before the
// scoreboard's table.
func TestWriteHTMLChartFirst(t *testing.T) {
	path, err := WriteHTML(t.TempDir(), labresult.Document{Experiments: chartResults()})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	page := string(b)
	chart, table := strings.Index(page, `<svg xmlns="http://www.w3.org/2000/svg" class="verdicts"`), strings.Index(page, "<table")
	if chart < 0 || chart > table {
		t.Errorf("the verdicts' chart (at %d) does not come before the scoreboard's table (at %d)", chart, table)
	}
	if n := strings.Count(page, `<g class="claim `); n != 9 {
		t.Errorf("the page draws %d claims, want 9", n)
	}
}
