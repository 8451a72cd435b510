package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
)

// WriteHTML writes dir/index.html: a self-contained page (inline CSS and
// SVG, no scripts or remote assets) that opens with a chart of every
// claim's verdict (VerdictChart), the scoreboard and the targets, then
// has, per experiment, the table, the verdict, a bar chart of RPS per
// setup (ours vs the report's) and latency percentile charts.
func WriteHTML(dir string, doc labresult.Document) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	path := filepath.Join(dir, "index.html")
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	data := struct {
		labresult.Document
		Generated string
	}{doc, time.Now().Format(time.RFC1123)}
	if err := page.Execute(f, data); err != nil {
		return "", fmt.Errorf("report: render %s: %w", path, err)
	}
	return path, f.Close()
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"num":         num,
	"pct":         func(v *float64) string { return num(scale(v, 100)) },
	"verdict":     labresult.VerdictWord,
	"word":        func(v labresult.Verdict) string { return v.Word() },
	"vclass":      func(v any) string { return VerdictClass(fmt.Sprint(v)) },
	"style":       func() template.CSS { return template.CSS(Style) },
	"cpus":        cpus,
	"ci":          ciText,
	"detail":      claimDetail,
	"setup":       claimText,
	"inc":         func(i int) int { return i + 1 },
	"differs":     func(s []labresult.Setup) bool { return labresult.FirstClaimDifferences(s) > 0 },
	"differences": labresult.DifferencesText,
	"target":      targetLine,
	"gates":       func(r *labresult.Row) []string { return r.IntegrityFailures() },
	"rpsChart": func(res *labresult.Result) template.HTML {
		return template.HTML(rpsChart(res))
	},
	"latencyChart": func(title string, rows []*labresult.Row, w, h int) template.HTML {
		return template.HTML(latencyChart(title, rows, w, h))
	},
	"one": func(r *labresult.Row) []*labresult.Row { return []*labresult.Row{r} },
	"env": envLine,
	"ref": func(r *labresult.Row, metric string) string {
		if r.Ref == nil {
			return "-"
		}
		switch metric {
		case "rps":
			return num(r.Ref.RPS)
		case "mean_ms":
			return num(r.Ref.MeanMS)
		}
		return "-"
	},
	"verdictChart": func(results []*labresult.Result) template.HTML {
		return VerdictChart(nil, chartLines(results))
	},
	"targets": func(results []*labresult.Result) bool {
		for _, r := range results {
			if len(r.Targets) > 0 {
				return true
			}
		}
		return false
	},
	"value": func(t labresult.TargetResult) string { return num(t.Value) + unitText(t.Unit) },
	"lower": strings.ToLower,
	"class": func(res *labresult.Result) string {
		return strings.ReplaceAll(strings.ToLower(labresult.VerdictWord(res)), " ", "-")
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Highload Lab report</title>
<style>{{style}}</style></head><body>
<h1>Highload Lab report</h1>
<p class="env">{{.Generated}} · {{.Machine.CPUs}} CPUs ({{.Machine.CPUModel}}) · CPU quota: <b>{{.Machine.CPUQuota}}</b> · {{.Machine.Go}} · {{.Machine.OS}}</p>
<h2 id="scoreboard">Scoreboard</h2>
{{verdictChart .Experiments}}
<p class="note">Each verdict reads the 95% confidence interval of a ratio over pairs of runs measured back to back (their order alternating), against the claim's threshold: REPRODUCED when the whole interval clears it, NOT REPRODUCED when it lies wholly beyond, INCONCLUSIVE when it straddles, INVALID when an integrity gate failed (data lost, requests failed, a service died, no quota). The first claim of each experiment reruns the report's own setup.</p>
<table><tr><th>experiment</th><th>#</th><th>verdict</th><th>ratio</th><th>interval</th><th>needs</th><th>pairs</th><th class="ref">report</th><th>claim</th></tr>
{{range $e := .Experiments}}{{range $i, $c := .Claims}}<tr><td><a href="#{{$e.Name}}">{{$e.Name}}</a></td><td>{{inc $i}}</td><td><span class="verdict {{vclass $c.Verdict}}">{{word $c.Verdict}}</span></td><td>{{num $c.Ratio}}</td><td>{{ci $c.CI}}</td><td>{{$c.Threshold}}</td><td>{{$c.Pairs}}{{if $c.NoisyPairs}} <span class="noisy">({{$c.NoisyPairs}} noisy)</span>{{end}}</td><td class="ref">{{$c.Report}}</td><td style="text-align:left">{{setup $e $i $c.Claim}}</td></tr>
{{end}}{{if not .Claims}}<tr><td>{{$e.Name}}</td><td>-</td><td><span class="verdict failed">{{verdict $e}}</span></td><td colspan="6">{{$e.Error}}</td></tr>{{end}}{{end}}</table>
{{range $e := .Experiments}}{{range .Claims}}{{if eq .Verdict "invalid"}}<p class="gate">{{$e.Name}}: INVALID: {{.Why}}</p>{{end}}{{end}}{{end}}
{{if targets .Experiments}}<h3 id="targets">Targets</h3>
<p class="note">Our own bounds on a figure; the verdict reads the figure's spread over runs (or the interval of a ratio over pairs): HOLDS when all of it is within the bound, FAILS when none is, INCONCLUSIVE when it straddles or the figure is not evidence.</p>
<table><tr><th>experiment</th><th>target</th><th>verdict</th><th>value</th><th>spread</th><th>needs</th><th>text</th></tr>
{{range $e := .Experiments}}{{range .Targets}}<tr><td><a href="#{{$e.Name}}">{{$e.Name}}</a></td><td style="text-align:left">{{.Key}}</td><td><span class="verdict {{vclass .Verdict}}">{{.Verdict.Word}}</span></td><td>{{value .}}</td><td>{{ci .Spread}}</td><td>{{.Bound}}</td><td style="text-align:left">{{.Target}}{{if .Why}}; {{.Why}}{{end}}</td></tr>
{{end}}{{end}}</table>{{end}}
{{range $e := .Experiments}}{{range .NotRerun}}<p class="note">{{$e.Name}}: not rerun: {{.Figure}}: {{.Why}}</p>{{end}}{{end}}
{{range .Experiments}}
<h2 id="{{.Name}}">{{.Name}}: {{.Title}}</h2>
<p><span class="verdict {{class .}}">{{verdict .}}</span>
{{if .Ratio}} measured ratio <b>{{num .Ratio}}</b>{{end}} · {{.Claim}}</p>
{{$e := .}}{{range $i, $c := .Claims}}<p>claim {{inc $i}}: {{setup $e $i $c.Claim}}<br><span class="verdict {{vclass $c.Verdict}}">{{word $c.Verdict}}</span> {{detail $c}}</p>{{end}}
{{if .Error}}<p class="verdict failed">FAILED: {{.Error}}</p>{{end}}
<p class="env">mode {{.Mode}} · {{printf "%.0f" .Seconds}} s · {{env .Env}}</p>
{{if .Setup}}<details class="setup"{{if differs .Setup}} open{{end}}><summary>setup beside the report's{{with differences .Setup}}: <b>{{.}}</b> in the first claim's rows{{end}}</summary>
<table><tr><th></th><th>item</th><th class="ref">report</th><th>ours</th><th>why</th></tr>
{{range .Setup}}<tr class="{{if .Marked}}marked{{end}}"><td>{{if .Marked}}!{{else if .Differs}}~{{else}}={{end}}</td><td>{{.Item}}</td><td class="ref"><code>{{.Report}}</code></td><td><code>{{.Ours}}</code></td><td style="text-align:left">{{.Why}}</td></tr>
{{end}}</table><p class="note">!: differs from the report's in the first claim's rows; ~: differs in other rows only; =: as the report.</p></details>{{end}}
<table><tr><th>setup</th><th>rps (ok only)</th><th>min–max</th><th>mean ms</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>ok %</th><th>cpu</th><th>rss MB</th><th>runs</th><th class="ref">report rps</th><th class="ref">report mean ms</th></tr>
{{range .Rows}}<tr><td>{{.Label}}{{if .Noisy}} <span class="noisy">[noisy]</span>{{end}}{{if .GeneratorSaturated}} <span class="noisy">[generator saturated]</span>{{end}}{{if gates .}} <span class="gate">[INTEGRITY]</span>{{end}}</td><td>{{num .RPS}}</td><td>{{if gt .Runs 1}}{{num .RPSMin}}–{{num .RPSMax}}{{end}}</td><td>{{num .MeanMS}}</td><td>{{num .P50MS}}</td><td>{{num .P99MS}}</td><td>{{num .P999MS}}</td><td>{{pct .SuccessRatio}}</td><td>{{num .CPUAvg}}</td><td>{{num .RSSMBAvg}}</td><td>{{.Runs}}</td><td class="ref">{{ref . "rps"}}</td><td class="ref">{{ref . "mean_ms"}}</td></tr>
{{end}}</table>
{{range .Rows}}{{$r := .}}{{range gates .}}<p class="gate">INTEGRITY: {{$r.Label}}: {{.}}</p>{{end}}{{if .GeneratorSaturated}}<p class="noisy">generator saturated: {{.Label}}: the load generator may be the bottleneck: it used {{cpus .GeneratorCPU}} of its {{cpus .GeneratorCPUsAvailable}} CPUs in a run</p>{{end}}{{if .Noisy}}<p class="noisy">noisy: {{.Label}}: up to {{num .OutsideCPU}} cores used outside the lab in a run (load average {{num .LoadAvg}})</p>{{end}}{{if .Note}}<p class="note">{{.Label}}: {{.Note}}</p>{{end}}{{end}}
{{range .Targets}}<p class="note">target {{.Key}}: {{.Target}}: <b>{{target .}}</b></p>{{end}}
{{range .Ratios}}<p class="note">ratio {{.Key}}: {{.Target}}: {{target .}}</p>{{end}}
{{range .NotRerun}}<p class="note">not rerun: {{.Figure}}: {{.Why}}</p>{{end}}
{{range .Notes}}<p class="note">note: {{.}}</p>{{end}}
<div class="charts">{{rpsChart .}}{{latencyChart "latency by percentile, all setups" .Rows 520 300}}</div>
<h3>latency percentiles per setup</h3>
<div class="small">{{range .Rows}}{{if .Percentiles}}{{latencyChart .Label (one .) 340 220}}{{end}}{{end}}</div>
{{end}}
</body></html>
`))

// Style is the style sheet of the pages hlab writes (the lab report, the
// comparison of two runs), so that they read alike. Verdicts take the
// class VerdictClass gives; .ref, .note, .env, .gate and .noisy mark
// secondary, explanatory, environment, integrity and noise text.
const Style = `body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0;font-variant-numeric:tabular-nums}
th,td{padding:.25em .6em;border-bottom:1px solid #eee;text-align:right}th:first-child,td:first-child{text-align:left}
th{background:#f6f6f6}.ref{color:#777}.verdict{font-weight:bold;padding:.2em .5em;border-radius:4px}
.reproduced,.holds{background:#d9f2d9;color:#145214}.not-reproduced,.fails{background:#fde2c8;color:#7a3b00}.failed,.invalid{background:#f8d0d0;color:#7a0000}.inconclusive{background:#e8e8f4;color:#333366}
.noisy{color:#8a6d00}.gate{color:#7a0000;font-weight:bold}
.env,.note{color:#555}.charts{display:flex;flex-wrap:wrap;gap:1em}.small{display:flex;flex-wrap:wrap;gap:.5em}
svg text{font:11px system-ui,sans-serif}
.setup td{text-align:left;vertical-align:top}.setup code{white-space:pre-wrap;font-size:12px}tr.marked td{background:#fff4e0}
`

// VerdictClass is the CSS class of Style that colours a verdict, a
// claim's or a target's.
func VerdictClass(v string) string { return strings.ReplaceAll(v, "_", "-") }

func scale(v *float64, k float64) *float64 {
	if v == nil {
		return nil
	}
	return labresult.F(*v * k)
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// rpsChart draws horizontal bars per row: ours (with a min–max whisker)
// and the report's, on one linear axis.
func rpsChart(res *labresult.Result) string {
	const w, labelW, barH, gap = 560, 290, 12, 10
	maxV := 0.0
	for _, r := range res.Rows {
		for _, v := range []*float64{r.RPS, r.RPSMax, refRPS(r)} {
			if v != nil && *v > maxV {
				maxV = *v
			}
		}
	}
	if maxV == 0 {
		return ""
	}
	h := 40 + len(res.Rows)*(2*barH+gap)
	plotW := float64(w - labelW - 60)
	x := func(v float64) float64 { return float64(labelW) + v/maxV*plotW }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="requests per second">`, w, h)
	fmt.Fprintf(&b, `<text x="0" y="14" font-weight="bold">requests/s per setup: ours vs report</text>`)
	fmt.Fprintf(&b, `<rect x="%d" y="22" width="10" height="8" fill="%s"/><text x="%d" y="30">ours (median, min–max)</text>`, labelW, palette[0], labelW+14)
	fmt.Fprintf(&b, `<rect x="%d" y="22" width="10" height="8" fill="#bbb"/><text x="%d" y="30">report</text>`, labelW+170, labelW+184)
	for i, r := range res.Rows {
		y := 40 + i*(2*barH+gap)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, labelW-6, y+barH+3, html.EscapeString(shorten(r.Label, 46)))
		if r.RPS != nil {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`, labelW, y, x(*r.RPS)-labelW, barH, palette[0])
			if r.RPSMin != nil && r.RPSMax != nil && r.Runs > 1 {
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000"/>`, x(*r.RPSMin), x(*r.RPSMax), y+barH/2, y+barH/2)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`, x(*r.RPS)+4, y+barH-2, num(r.RPS))
		}
		if v := refRPS(r); v != nil {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#bbb"/>`, labelW, y+barH, x(*v)-labelW, barH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#666">%s</text>`, x(*v)+4, y+2*barH-2, num(v))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func refRPS(r *labresult.Row) *float64 {
	if r.Ref == nil {
		return nil
	}
	return r.Ref.RPS
}

// latencyChart draws latency (log scale) against percentile on a "nines"
// axis (50, 90, 99, 99.9, ...), one line per row, as HdrHistogram plots do.
func latencyChart(title string, rows []*labresult.Row, w, h int) string {
	const left, right, top = 50, 10, 24
	bottom := 30
	if len(rows) > 1 {
		bottom += 13 * len(rows) // the legend goes under the axis
		h += 13 * len(rows)
	}
	minMS, maxMS, maxNines := math.Inf(1), 0.0, 2.0
	n := 0
	for _, r := range rows {
		for _, p := range r.Percentiles {
			if p.MS > 0 {
				minMS, maxMS = math.Min(minMS, p.MS), math.Max(maxMS, p.MS)
			}
			maxNines = math.Max(maxNines, nines(p.Q))
			n++
		}
	}
	if n == 0 || maxMS == 0 {
		return ""
	}
	lo, hi := math.Floor(math.Log10(minMS)), math.Ceil(math.Log10(maxMS))
	if hi == lo {
		hi++
	}
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	px := func(q float64) float64 { return left + nines(q)/maxNines*pw }
	py := func(v float64) float64 { return top + ph - (math.Log10(math.Max(v, math.Pow(10, lo)))-lo)/(hi-lo)*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">`, w, h, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="0" y="14" font-weight="bold">%s</text>`, html.EscapeString(shorten(title, 60)))
	for e := lo; e <= hi; e++ {
		y := py(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s ms</text>`, left, w-right, y, y, left-4, y+4, trimFloat(math.Pow(10, e)))
	}
	for _, q := range []float64{50, 90, 99, 99.9, 99.99, 99.999} {
		if nines(q) > maxNines+1e-9 {
			break
		}
		x := px(q)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">p%s</text>`, x, x, top, h-bottom, x, h-bottom+14, trimFloat(q))
	}
	for i, r := range rows {
		color := palette[i%len(palette)]
		var pts []string
		for _, p := range r.Percentiles {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.Q), py(p.MS)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"><title>%s</title></polyline>`, color, strings.Join(pts, " "), html.EscapeString(r.Label))
		if len(rows) > 1 {
			y := h - bottom + 26 + i*13
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`, left, y-4, color, left+14, y, html.EscapeString(shorten(r.Label, 70)))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// nines maps a percentile to -log10(1 - q/100): 90 → 1, 99 → 2; 100 (the
// max) is drawn one step past 99.999.
func nines(q float64) float64 {
	if q >= 100 {
		return 5.3
	}
	return -math.Log10(1 - q/100)
}

func trimFloat(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// shorten cuts s to n characters, the last an ellipsis when cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}
