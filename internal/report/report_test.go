package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// sample is a fixed result with a claim that holds and a row with missing
// figures, so the renderings of both are pinned.
func sample() *lab.Result {
	f := lab.F
	one := &lab.Row{Label: "one instance, 1 connection", RPS: f(645), MeanMS: f(1.55), P50MS: f(0.29), P99MS: f(54),
		SuccessRatio: f(1), CPUAvg: f(0.197), RSSMBAvg: f(19.3), RSSMBMax: f(20), Runs: 3, RPSMin: f(618), RPSMax: f(648),
		Ref: &lab.Ref{RPS: f(169), MeanMS: f(22.55)}, Model: "closed", Connections: 1,
		Percentiles: []lab.Percentile{{Q: 50, MS: 0.29}, {Q: 90, MS: 1}, {Q: 99, MS: 54}, {Q: 100, MS: 80}}}
	three := &lab.Row{Label: "three instances + LB, 1 connection", RPS: f(1460), MeanMS: f(0.68), P50MS: f(0.4), P99MS: f(3.9),
		SuccessRatio: f(1), Runs: 3, RPSMin: f(1330), RPSMax: f(1516), Ref: &lab.Ref{RPS: f(450), MeanMS: f(9.09)},
		Errors:      map[string]int64{"timeout": 2},
		Percentiles: []lab.Percentile{{Q: 50, MS: 0.4}, {Q: 90, MS: 0.9}, {Q: 99, MS: 3.9}, {Q: 100, MS: 12}}}
	for i, v := range []float64{618, 645, 648} {
		one.PerRun = append(one.PerRun, lab.RunValues{Round: i + 1, Values: map[string]float64{"rps": v}})
	}
	for i, v := range []float64{1330, 1460, 1516} {
		three.PerRun = append(three.PerRun, lab.RunValues{Round: i + 1, Values: map[string]float64{"rps": v}, Noisy: i == 2, OutsideCPU: 0.3})
	}
	three.Noisy, three.OutsideCPU, three.LoadAvg = true, f(0.3), f(1.2)
	missing := &lab.Row{Label: "sweep with no passing rate", Note: "no rate met the objective"}
	res := &lab.Result{Name: "scale", Title: "stateless scaling", Env: map[string]string{"lb": "nginx 1.22.1"},
		Rows: []*lab.Row{one, three, missing}, Mode: lab.Quick}
	c := lab.Claim{Text: "three >= 2x one", Metric: "rps", Numerator: three.Label, Denominator: one.Label, AtLeast: 2, Report: "450 / 169 = 2.66"}
	res.Checks = []lab.Check{{Text: "a check", Holds: true, Detail: "8 vs 1"}}
	res.NotRerun = []lab.NotRerun{{Figure: "a figure", Why: "a reason"}}
	lab.Judge(res, []lab.Claim{c})
	return res
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sample()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"ratio 2.25, 95% interval [2.03, 2.50]", "REPRODUCED", "645", "169", "errors in \"three instances + LB, 1 connection\": timeout 2",
		"3 pairs: 2.15 2.26 2.34 (1 with a noisy run)", "[noisy]", "check: a check: HOLDS (8 vs 1)", "not rerun: a figure: a reason", "report: 450 / 169 = 2.66"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	golden(t, "scale.txt", b.Bytes())
}

func TestJSONContract(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := WriteJSONFile(path, Document{Machine: lab.Machine{CPUs: 2, CPUQuota: "cgroup-v1", Go: "go1.26.8"}, Experiments: []*lab.Result{sample()}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var doc struct {
		Machine     map[string]any   `json:"machine"`
		Experiments []map[string]any `json:"experiments"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cpus", "cpu_quota", "go"} {
		if _, ok := doc.Machine[k]; !ok {
			t.Errorf("machine lacks %q", k)
		}
	}
	exp := doc.Experiments[0]
	for _, k := range []string{"name", "claim", "ratio", "reproduced", "verdict", "claims", "env", "rows", "checks", "not_rerun"} {
		if _, ok := exp[k]; !ok {
			t.Errorf("experiment lacks %q", k)
		}
	}
	claim := exp["claims"].([]any)[0].(map[string]any)
	for _, k := range []string{"claim", "ratio", "reproduced", "verdict", "ci", "ci_level", "pairs", "pair_ratios", "noisy_pairs", "threshold"} {
		if _, ok := claim[k]; !ok {
			t.Errorf("claim lacks %q", k)
		}
	}
	if claim["verdict"] != "reproduced" || claim["pairs"] != 3.0 || len(claim["ci"].([]any)) != 2 {
		t.Errorf("claim = %v", claim)
	}
	rows := exp["rows"].([]any)
	first := rows[0].(map[string]any)
	for _, k := range []string{"label", "rps", "mean_ms", "p50_ms", "p99_ms", "success_ratio", "rss_mb_avg", "rss_mb_max", "cpu_avg", "runs", "rps_min", "rps_max", "ref", "success_bound", "outside_cpu", "load_avg", "noisy", "per_run"} {
		if _, ok := first[k]; !ok {
			t.Errorf("row lacks %q", k)
		}
	}
	if ref := first["ref"].(map[string]any); ref["rps"] != 169.0 || ref["mean_ms"] != 22.55 {
		t.Errorf("ref = %v", ref)
	}
	// A figure that was not measured is null, never invented.
	last := rows[2].(map[string]any)
	if v, ok := last["rps"]; !ok || v != nil {
		t.Errorf("missing rps = %v (present %v), want null", v, ok)
	}
}

func TestWriteHTML(t *testing.T) {
	dir := t.TempDir()
	path, err := WriteHTML(dir, Document{Machine: lab.Machine{CPUs: 2, CPUQuota: "cgroup-v1"}, Experiments: []*lab.Result{sample()}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	page := string(b)
	for _, want := range []string{"<svg", "requests/s per setup", "latency by percentile", "REPRODUCED", "one instance, 1 connection", "Scoreboard", "95% interval [", "[noisy]", "not rerun: a figure"} {
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
	lab.Judge(res, []lab.Claim{{Text: "three >= 2x one", Metric: "rps", Numerator: res.Rows[1].Label, Denominator: res.Rows[0].Label, AtLeast: 2}})
	var text bytes.Buffer
	WriteScoreboard(&text, []*lab.Result{res})
	WriteText(&text, res)
	dir := t.TempDir()
	path, err := WriteHTML(dir, Document{Experiments: []*lab.Result{res}})
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

// TestReadJSONFile: what WriteJSONFile writes reads back; a file that is
// not a lab run's JSON is ErrNotLabJSON, saying so.
func TestReadJSONFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	doc := Document{Machine: lab.Machine{CPUs: 2, CPUQuota: "cgroup-v1", Go: "go1.26.8"}, Experiments: []*lab.Result{sample()}}
	if err := WriteJSONFile(path, doc); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSONFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Machine != doc.Machine || len(got.Experiments) != 1 || got.Experiments[0].Claims[0].Verdict != lab.Reproduced || *got.Experiments[0].Rows[0].RPS != 645 || got.Experiments[0].Rows[2].RPS != nil {
		t.Errorf("read back %+v", got.Experiments[0])
	}
	for _, tt := range []struct{ name, body, want string }{
		{"empty object", `{}`, "no experiments"},
		{"load output", `{"requests": 10, "rps": 5}`, "no experiments"},
		{"unnamed experiment", `{"experiments": [{"rows": []}]}`, "has no name"},
		{"not JSON", `rps 5`, "invalid character"},
	} {
		p := filepath.Join(dir, tt.name+".json")
		os.WriteFile(p, []byte(tt.body), 0o644)
		_, err := ReadJSONFile(p)
		if !errors.Is(err, ErrNotLabJSON) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want ErrNotLabJSON saying %q", tt.name, err, tt.want)
		}
	}
	if _, err := ReadJSONFile(filepath.Join(dir, "absent.json")); err == nil || errors.Is(err, ErrNotLabJSON) {
		t.Errorf("absent file: err = %v", err)
	}
}

// TestGeneratorSaturatedMarked: a row whose load generator used nearly
// all its CPU is marked in the text and the HTML, with the figures.
func TestGeneratorSaturatedMarked(t *testing.T) {
	res := sample()
	r := res.Rows[0]
	r.GeneratorCPU, r.GeneratorCPUsAvailable, r.GeneratorSaturated = lab.F(0.97), lab.F(1), true
	var b strings.Builder
	if err := WriteText(&b, res); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, err := WriteHTML(dir, Document{Machine: lab.Machine{CPUs: 2, CPUQuota: "cgroup-v1"}, Experiments: []*lab.Result{res}})
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
