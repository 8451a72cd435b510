package labresult

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sample is a result of two rows in rounds, a claim over them, a target,
// and a row with no figures.
func sample() *Result {
	one := paired("one/c1", "one instance, 1 connection", map[string]float64{"rps": 645})
	one.RPSMin, one.RPSMax, one.MeanMS, one.P50MS, one.P99MS, one.SuccessRatio = F(618), F(648), F(1.55), F(0.29), F(54), F(1)
	one.RSSMBAvg, one.RSSMBMax, one.CPUAvg, one.OutsideCPU, one.LoadAvg = F(19.3), F(20), F(0.197), F(0), F(0.5)
	one.Ref = &Ref{RPS: F(169), MeanMS: F(22.55)}
	three := paired("three-lb/c1", "three instances + LB, 1 connection", map[string]float64{"rps": 1460})
	missing := &Row{Key: "sweep", Label: "sweep with no passing rate"}
	res := &Result{Name: "scale", Title: "stateless scaling", Env: map[string]string{}, Rows: []*Row{one, three, missing}, Mode: "quick"}
	res.NotRerun = []NotRerun{{Figure: "a figure", Why: "a reason"}}
	Judge(res, []Claim{{Text: "three >= 2x one", Ratio: Ratio{Num: three.Key, Den: one.Key, Metric: "rps"}, Bound: AtLeast(2)}},
		[]Target{{Key: "one-rate", Text: "one instance at 600 rps", Row: one.Key, Metric: "rps", Bound: AtLeast(600)}})
	return res
}

func TestJSONContract(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	res := sample()
	res.Setup = []Setup{{Item: "nginx upstream", Report: "defaults", Ours: "keepalive 64", Why: "ours", FirstClaim: true}}
	if err := WriteJSONFile(path, Document{Machine: Machine{CPUs: 2, CPUQuota: "cgroup-v1", Go: "go1.26.8"}, Experiments: []*Result{res}}); err != nil {
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
	for _, k := range []string{"name", "claim", "ratio", "reproduced", "verdict", "claims", "targets", "env", "rows", "not_rerun"} {
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
	target := exp["targets"].([]any)[0].(map[string]any)
	for _, k := range []string{"target", "key", "value", "bound", "verdict", "spread"} {
		if _, ok := target[k]; !ok {
			t.Errorf("target lacks %q", k)
		}
	}
	if target["verdict"] != "holds" || target["bound"] != ">= 600" || target["key"] != "one-rate" {
		t.Errorf("target = %v", target)
	}
	setup := exp["setup"].([]any)[0].(map[string]any)
	if setup["item"] != "nginx upstream" || setup["report"] != "defaults" || setup["ours"] != "keepalive 64" || setup["why"] != "ours" ||
		setup["differs"] != true || setup["claim1"] != true {
		t.Errorf("setup = %v", setup)
	}
	back, err := ReadJSONFile(path)
	if err != nil || len(back.Experiments[0].Setup) != 1 || back.Experiments[0].Setup[0] != res.Setup[0] {
		t.Errorf("setup read back: %+v, %v", back.Experiments, err)
	}
	rows := exp["rows"].([]any)
	first := rows[0].(map[string]any)
	for _, k := range []string{"key", "label", "rps", "mean_ms", "p50_ms", "p99_ms", "success_ratio", "rss_mb_avg", "rss_mb_max", "cpu_avg", "runs", "rps_min", "rps_max", "ref", "success_bound", "outside_cpu", "load_avg", "noisy", "per_run"} {
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

// TestReadJSONFile: what WriteJSONFile writes reads back; a file that is
// not a lab run's JSON is ErrNotLabJSON, saying so.
func TestReadJSONFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	doc := Document{Machine: Machine{CPUs: 2, CPUQuota: "cgroup-v1", Go: "go1.26.8"}, Experiments: []*Result{sample()}}
	if err := WriteJSONFile(path, doc); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSONFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Machine != doc.Machine || len(got.Experiments) != 1 || got.Experiments[0].Claims[0].Verdict != Reproduced || *got.Experiments[0].Rows[0].RPS != 645 || got.Experiments[0].Rows[2].RPS != nil {
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
