package labcompare

import (
	"cmp"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/report"
)

// WriteHTML writes dir/compare.html: c as a self-contained page in the
// lab report's style, verdict moves first, then the lab report's chart of
// every claim for A and B side by side, and the environment.
func WriteHTML(dir string, c *Comparison) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("labcompare: %w", err)
	}
	path := filepath.Join(dir, "compare.html")
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("labcompare: %w", err)
	}
	defer f.Close()
	data := struct {
		*Comparison
		Generated string
	}{c, time.Now().Format(time.RFC1123)}
	if err := page.Execute(f, data); err != nil {
		return "", fmt.Errorf("labcompare: render %s: %w", path, err)
	}
	return path, f.Close()
}

// verdictChart draws every claim of c, matched across the runs, in
// the lab report's chart: A's panel beside B's on one axis.
func verdictChart(c *Comparison) template.HTML {
	var lines []report.ChartLine
	for _, e := range c.Experiments {
		for _, cl := range e.Claims {
			label := fmt.Sprintf("%s #%d", e.Name, cl.Index)
			switch cl.Presence {
			case Added:
				label += " (B only)"
			case Removed:
				label += " (A only)"
			}
			lines = append(lines, report.ChartLine{Experiment: e.Name, Label: label, Claim: cl.Claim, Runs: []*labresult.ClaimResult{cl.A, cl.B}, Marked: cl.Moved})
		}
		if len(e.Claims) == 0 {
			lines = append(lines, report.ChartLine{Experiment: e.Name, Label: e.Name, Runs: []*labresult.ClaimResult{nil, nil}, Absent: report.NoClaims(cmp.Or(e.ErrorB, e.ErrorA)), Failed: e.ErrorA != "" || e.ErrorB != ""})
		}
	}
	return report.VerdictChart([]string{"A: " + c.A, "B: " + c.B}, lines)
}

var page = template.Must(template.New("compare").Funcs(template.FuncMap{
	"style":   func() template.CSS { return template.CSS(report.Style) },
	"chart":   verdictChart,
	"vclass":  func(v any) string { return report.VerdictClass(fmt.Sprint(v)) },
	"word":    func(v any) string { return Word(fmt.Sprint(v)) },
	"target":  targetSide,
	"fig":     fig,
	"name":    FigureName,
	"spread":  spreadText,
	"rng":     rangeText,
	"orMiss":  orMissing,
	"runs":    runsText,
	"verdict": verdictCell,
	"ci": func(s *labresult.ClaimResult) string {
		if s == nil {
			return missing
		}
		return sideCells(s)[1]
	},
	"ratio": func(s *labresult.ClaimResult) string {
		if s == nil {
			return missing
		}
		return fig(s.Ratio)
	},
	"pairs": func(s *labresult.ClaimResult) string {
		if s == nil {
			return missing
		}
		return fmt.Sprint(s.Pairs)
	},
	"overlap": func(o *bool) string {
		switch {
		case o == nil:
			return ""
		case *o:
			return "overlap"
		}
		return "disjoint"
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Highload Lab: two runs compared</title>
<style>{{style}}
.moved td{background:#fff6d6}.outside{font-weight:bold;color:#7a3b00}.within{color:#777}.added{color:#145214}.removed{color:#7a0000}
tr.rowhead td{text-align:left;font-weight:bold;background:#fafafa}
</style></head><body>
<h1>Two lab runs compared</h1>
<p class="env">{{.Generated}} · A = <b>{{.A}}</b> · B = <b>{{.B}}</b></p>
<h2 id="summary">Summary</h2>
<p><b>{{.MovedLine}}</b></p>
{{if .Moved}}<ul>{{range .Moved}}<li><span class="verdict {{vclass .From}}">{{word .From}}</span> → <span class="verdict {{vclass .To}}">{{word .To}}</span> <a href="#{{.Experiment}}">{{.Experiment}}</a> {{if eq .Kind "target"}}target {{.Key}}{{else}}#{{.Index}}{{end}}: {{.Claim}}</li>{{end}}</ul>{{end}}
{{range .CountsLines}}<p>{{.}}</p>{{end}}
{{with .OutsideSpread}}<ul>{{range .}}<li class="outside">OUTSIDE spread: {{.}}</li>{{end}}</ul>{{end}}
<p class="note">A figure's change is "within spread" when B's median lies within A's min–max over its runs, or A's within B's: no larger than the noise between runs. Only rows measured more than once keep a spread. "—": not measured, or not in that run.</p>
<h2 id="claims">Every claim, A beside B</h2>
{{chart .Comparison}}
<h2 id="env">Environment</h2>
{{if .Env}}<p class="note">What differs between the runs; it may explain changes in the figures.</p>
<table><tr><th>where</th><th>what</th><th>A</th><th>B</th></tr>
{{range .Env}}<tr><td>{{if .Experiment}}{{.Experiment}}{{else}}machine{{end}}</td><td style="text-align:left">{{.Key}}</td><td style="text-align:left">{{orMiss .A}}</td><td style="text-align:left">{{orMiss .B}}</td></tr>
{{end}}</table>{{else}}<p>The same in both runs (machine, Go, quotas, dependencies).</p>{{end}}
{{range $e := .Experiments}}
<h2 id="{{.Name}}">{{.Name}}: {{.Title}}{{if eq .Presence "added"}} <span class="added">[added: only in B]</span>{{else if eq .Presence "removed"}} <span class="removed">[removed: only in A]</span>{{end}}</h2>
{{if .ErrorA}}<p class="verdict failed">FAILED in A: {{.ErrorA}}</p>{{end}}{{if .ErrorB}}<p class="verdict failed">FAILED in B: {{.ErrorB}}</p>{{end}}
{{if .Claims}}<table><tr><th>#</th><th>verdict A → B</th><th>ratio A</th><th>interval A</th><th>pairs</th><th>ratio B</th><th>interval B</th><th>pairs</th><th>B/A</th><th>B−A</th><th>intervals</th><th>claim</th></tr>
{{range .Claims}}<tr{{if .Moved}} class="moved"{{end}}><td>{{.Index}}</td><td>{{if .Moved}}<b>MOVED</b> <span class="verdict {{vclass .A.Verdict}}">{{word .A.Verdict}}</span> → <span class="verdict {{vclass .B.Verdict}}">{{word .B.Verdict}}</span>{{else if .B}}{{if .A}}{{else}}<span class="added">added:</span> {{end}}<span class="verdict {{vclass .B.Verdict}}">{{word .B.Verdict}}</span>{{else}}<span class="removed">removed:</span> <span class="verdict {{vclass .A.Verdict}}">{{word .A.Verdict}}</span>{{end}}</td><td>{{ratio .A}}</td><td>{{ci .A}}</td><td>{{pairs .A}}</td><td>{{ratio .B}}</td><td>{{ci .B}}</td><td>{{pairs .B}}</td><td>{{fig .Change}}</td><td>{{fig .Diff}}</td><td>{{overlap .Overlap}}</td><td style="text-align:left">{{.Claim}}</td></tr>
{{end}}</table>{{end}}
{{if .Targets}}<table><tr><th>target</th><th>verdict A → B</th><th>A</th><th>B</th><th>needs</th><th>text</th></tr>
{{range .Targets}}<tr{{if .Moved}} class="moved"{{end}}><td>{{.Key}}</td><td>{{if .Moved}}<b>MOVED</b> <span class="verdict {{vclass .A.Verdict}}">{{word .A.Verdict}}</span> → <span class="verdict {{vclass .B.Verdict}}">{{word .B.Verdict}}</span>{{else if .B}}{{if .A}}{{else}}<span class="added">added:</span> {{end}}<span class="verdict {{vclass .B.Verdict}}">{{word .B.Verdict}}</span>{{else}}<span class="removed">removed:</span> <span class="verdict {{vclass .A.Verdict}}">{{word .A.Verdict}}</span>{{end}}</td><td>{{target .A}}</td><td>{{target .B}}</td><td>{{if .B}}{{.B.Bound}}{{else}}{{.A.Bound}}{{end}}</td><td style="text-align:left">{{.Target}}</td></tr>
{{end}}</table>{{end}}
{{range .NotRerun}}{{if ne .Presence "both"}}<p class="note"><span class="{{.Presence}}">not rerun, {{.Presence}}:</span> {{.Figure}}: {{.Why}}</p>{{end}}{{end}}
{{range .Setup}}{{if eq .Presence "removed"}}<p class="note"><span class="removed">setup, removed:</span> {{.A.Line}}</p>{{else if eq .Presence "added"}}<p class="note"><span class="added">setup, added:</span> {{.B.Line}}</p>{{else if .Changed}}<p class="note"><b>setup, changed:</b> A {{.A.Line}}<br>B {{.B.Line}}</p>{{end}}{{end}}
{{if .Rows}}<table><tr><th>row / figure</th><th>A</th><th>B</th><th>B/A</th><th>spread</th><th>A min–max</th><th>B min–max</th></tr>
{{range .Rows}}<tr class="rowhead"><td colspan="7">{{.Label}} <span class="{{.Presence}}">{{runs .}}</span></td></tr>
{{range .Figures}}<tr><td>&nbsp;&nbsp;{{name .Key}}</td><td>{{fig .A}}</td><td>{{fig .B}}</td><td>{{fig .Change}}</td><td class="{{.Spread}}">{{spread .Spread}}</td><td>{{rng .RangeA}}</td><td>{{rng .RangeB}}</td></tr>
{{end}}{{end}}</table>{{end}}
{{end}}
</body></html>
`))
