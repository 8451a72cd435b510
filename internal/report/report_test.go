package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// sample is a fixed result with a claim that holds and a row with missing
// figures, so the renderings of both are pinned.
func sample() *labresult.Result {
	f := labresult.F
	one := &labresult.Row{Key: "one/c1", Label: "one instance, 1 connection", RPS: f(645), MeanMS: f(1.55), P50MS: f(0.29), P99MS: f(54),
		SuccessRatio: f(1), CPUAvg: f(0.197), RSSMBAvg: f(19.3), RSSMBMax: f(20), Runs: 3, RPSMin: f(618), RPSMax: f(648),
		Ref: &labresult.Ref{RPS: f(169), MeanMS: f(22.55)}, Model: "closed", Connections: 1,
		Percentiles: []labresult.Percentile{{Q: 50, MS: 0.29}, {Q: 90, MS: 1}, {Q: 99, MS: 54}, {Q: 100, MS: 80}}}
	three := &labresult.Row{Key: "three-lb/c1", Label: "three instances + LB, 1 connection", RPS: f(1460), MeanMS: f(0.68), P50MS: f(0.4), P99MS: f(3.9),
		SuccessRatio: f(1), Runs: 3, RPSMin: f(1330), RPSMax: f(1516), Ref: &labresult.Ref{RPS: f(450), MeanMS: f(9.09)},
		Errors:      map[string]int64{"timeout": 2},
		Percentiles: []labresult.Percentile{{Q: 50, MS: 0.4}, {Q: 90, MS: 0.9}, {Q: 99, MS: 3.9}, {Q: 100, MS: 12}}}
	for i, v := range []float64{618, 645, 648} {
		one.PerRun = append(one.PerRun, labresult.RunValues{Round: i + 1, Values: map[string]float64{"rps": v}})
	}
	for i, v := range []float64{1330, 1460, 1516} {
		three.PerRun = append(three.PerRun, labresult.RunValues{Round: i + 1, Values: map[string]float64{"rps": v}, Noisy: i == 2, OutsideCPU: 0.3})
	}
	three.Noisy, three.OutsideCPU, three.LoadAvg = true, f(0.3), f(1.2)
	missing := &labresult.Row{Key: "sweep", Label: "sweep with no passing rate", Note: "no rate met the objective"}
	res := &labresult.Result{Name: "scale", Title: "stateless scaling", Env: map[string]string{"lb": "nginx 1.22.1"},
		Rows: []*labresult.Row{one, three, missing}, Mode: "quick"}
	c := labresult.Claim{Text: "three >= 2x one", Ratio: labresult.Ratio{Num: three.Key, Den: one.Key, Metric: "rps"}, Bound: labresult.AtLeast(2), Report: "450 / 169 = 2.66"}
	res.NotRerun = []labresult.NotRerun{{Figure: "a figure", Why: "a reason"}}
	labresult.Judge(res, []labresult.Claim{c}, []labresult.Target{
		{Key: "one-rate", Text: "one instance serves at least 600 requests per second", Row: one.Key, Metric: "rps", Bound: labresult.AtLeast(600)},
		{Key: "three-over-one", Text: "three instances over one", Ratio: &labresult.Ratio{Num: three.Key, Den: one.Key, Metric: "rps"}, Unit: "x"},
	})
	return res
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got, *update)
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sample()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"ratio 2.25, 95% interval [2.03, 2.50]", "REPRODUCED", "645", "169", "errors in \"three instances + LB, 1 connection\": timeout 2",
		"3 pairs: 2.15 2.26 2.34 (1 with a noisy run)", "[noisy]", "target one-rate: one instance serves at least 600 requests per second", "HOLDS: 645 req/s [618, 648], needs >= 600", "ratio three-over-one: three instances over one: 2.25x [2.03, 2.50] over 3 pairs", "not rerun: a figure: a reason", "report: 450 / 169 = 2.66"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	golden(t, "scale.txt", b.Bytes())
}

func TestWriteHTML(t *testing.T) {
	dir := t.TempDir()
	path, err := WriteHTML(dir, labresult.Document{Machine: labresult.Machine{CPUs: 2, CPUQuota: "cgroup-v1"}, Experiments: []*labresult.Result{sample()}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	page := string(b)
	for _, want := range []string{"<svg", "requests/s per setup", "latency by percentile", "REPRODUCED", "one instance, 1 connection", "Scoreboard", "95% interval [", "[noisy]", "not rerun: a figure",
		`<h3 id="targets">Targets</h3>`, `<td style="text-align:left">one-rate</td><td><span class="verdict holds">HOLDS</span></td><td>645 req/s</td><td>[618, 648]</td><td>&gt;= 600</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Self-contained: nothing fetched from elsewhere.
	for _, bad := range []string{"<script src", "<link ", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("page references an outside resource (%q)", bad)
		}
	}
}

// TestInvalidRendered: a claim an integrity gate failed shows as INVALID,
// with its reason, in the scoreboard and the experiment, text and HTML.
func TestInvalidRendered(t *testing.T) {
	res := sample()
	lost := int64(3)
	res.Rows[1].Lost = &lost
	labresult.Judge(res, []labresult.Claim{{Text: "three >= 2x one", Ratio: labresult.Ratio{Num: res.Rows[1].Key, Den: res.Rows[0].Key, Metric: "rps"}, Bound: labresult.AtLeast(2)}}, nil)
	var text bytes.Buffer
	WriteScoreboard(&text, []*labresult.Result{res})
	WriteText(&text, res)
	dir := t.TempDir()
	path, err := WriteHTML(dir, labresult.Document{Experiments: []*labresult.Result{res}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(path)
	for name, out := range map[string]string{"text": text.String(), "HTML": string(page)} {
		for _, want := range []string{"INVALID", "lost 3 acknowledged messages or writes", "INTEGRITY"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
	}
	if !strings.Contains(string(page), `class="gate">gate`) && !strings.Contains(string(page), `class="gate">scale: INVALID`) {
		t.Errorf("the HTML scoreboard does not list the invalid claim's reason")
	}
}

// TestGeneratorSaturatedMarked: a row whose load generator used nearly
// all its CPU is marked in the text and the HTML, with the figures.
func TestGeneratorSaturatedMarked(t *testing.T) {
	res := sample()
	r := res.Rows[0]
	r.GeneratorCPU, r.GeneratorCPUsAvailable, r.GeneratorSaturated = labresult.F(0.97), labresult.F(1), true
	var b strings.Builder
	if err := WriteText(&b, res); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, err := WriteHTML(dir, labresult.Document{Machine: labresult.Machine{CPUs: 2, CPUQuota: "cgroup-v1"}, Experiments: []*labresult.Result{res}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(path)
	for name, out := range map[string]string{"text": b.String(), "html": string(page)} {
		for _, want := range []string{"[generator saturated]", "it used 0.97 of its 1 CPUs"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"generator_saturated":true`) || !strings.Contains(string(data), `"generator_cpu":0.97`) {
		t.Errorf("row JSON: %s", data)
	}
}

// TestSetupShown: an experiment's setup items show under it in the text
// and the HTML, each difference with its why, and the first claim says
// how many items of its rows differ from the report's.
func TestSetupShown(t *testing.T) {
	res := &labresult.Result{Name: "scale", Title: "scaling",
		Claims: []labresult.ClaimResult{{Claim: "three serve >= 2x one", Verdict: labresult.Reproduced}},
		Setup: []labresult.Setup{
			{Item: "balancer", Report: "nginx", Ours: "built-in", Why: "the embedded default", FirstClaim: true},
			{Item: "quota", Report: "0.2 CPU", Ours: "0.2 CPU", FirstClaim: true},
			{Item: "upstream keepalive", Report: "none", Ours: "64", Why: "ours, in claim 3"},
		}}
	var text, board bytes.Buffer
	if err := WriteText(&text, res); err != nil {
		t.Fatal(err)
	}
	if err := WriteScoreboard(&board, []*labresult.Result{res}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, err := WriteHTML(dir, labresult.Document{Experiments: []*labresult.Result{res}})
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ where, got, want string }{
		{"text", text.String(), "! balancer: report nginx; ours built-in\n      why: the embedded default"},
		{"text", text.String(), "= quota: 0.2 CPU (as the report)"},
		{"text", text.String(), "~ upstream keepalive: report none; ours 64"},
		{"text", text.String(), "(report's setup; 1 setup item differs from the report's) three serve"},
		{"scoreboard", board.String(), "(report's setup; 1 setup item differs from the report's) three serve"},
		{"html", string(html), "<b>1 setup item differs from the report&#39;s</b> in the first claim's rows"},
		{"html", string(html), ">the embedded default</td>"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("%s lacks %q:\n%s", c.where, c.want, c.got)
		}
	}
}
