package grafana_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/highload-lab/hlab/deploy/grafana"
	"github.com/highload-lab/hlab/internal/deps/depstest"
)

// alertedBy names the services each rule file's alerts watch; every
// service must export every metric the rules use.
var alertedBy = map[string][]string{
	"tasks.rules.yml":   {"tasks"},
	"databus.rules.yml": {"databus"},
	"replica.rules.yml": {"catalog", "pricing"},
}

// ruleFile is what the checks read of a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// ruleTests is what the checks read of a promtool test file.
type ruleTests struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Name        string `yaml:"name"`
		Interval    string `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// alertMetricsMissing returns the metric names the rules of file use
// that exported lacks.
func alertMetricsMissing(t *testing.T, file string, exported map[string]bool) ([]string, error) {
	var rf ruleFile
	readYAML(t, filepath.Join("alerts", file), &rf)
	missing := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			names, err := grafana.MetricNames(r.Expr)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				if !exported[n] {
					missing[n] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(missing)), nil
}

// TestAlertRules holds the alert rules to what an on-call engineer needs
// and to their own tests: each alert has a "for", a severity, a summary
// and a description that says what to look at first; each is tested
// firing and not firing; `promtool check rules` accepts the files (their
// PromQL and their annotations' templates), and `promtool test rules`
// passes. promtool compares annotations verbatim and the runbook text
// lives once, in the rules, so the tests run on copies of the rules
// without their annotations.
func TestAlertRules(t *testing.T) {
	promtool := depstest.Promtool(t)
	rules, err := filepath.Glob("alerts/*.rules.yml")
	if err != nil || len(rules) == 0 {
		t.Fatalf("no alert rules in alerts/: %v", err)
	}
	t.Logf("promtool check rules:\n%s", runPromtool(t, promtool, ".", append([]string{"check", "rules"}, rules...)...))

	dir := t.TempDir()
	var tests []string
	for _, path := range rules {
		file := filepath.Base(path)
		if _, ok := alertedBy[file]; !ok {
			t.Errorf("%s: no service is named for it in alertedBy, so nothing checks its metrics", file)
		}
		var rf ruleFile
		readYAML(t, path, &rf)
		alerts := checkRules(t, file, &rf)
		testFile := strings.TrimSuffix(file, ".rules.yml") + ".test.yml"
		var rt ruleTests
		readYAML(t, filepath.Join("alerts", testFile), &rt)
		checkCoverage(t, testFile, file, alerts, &rt)

		stripped, err := yaml.Marshal(&rf) // annotations cleared by checkRules
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join("alerts", testFile), filepath.Join(dir, testFile))
		if err := os.WriteFile(filepath.Join(dir, file), stripped, 0o644); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, testFile)
	}
	t.Logf("promtool test rules:\n%s", runPromtool(t, promtool, dir, append([]string{"test", "rules"}, tests...)...))
}

// checkRules checks every rule of file has what an alert needs, returns
// the alerts' names, and clears the annotations (for promtool test).
func checkRules(t *testing.T, file string, rf *ruleFile) []string {
	t.Helper()
	var names []string
	for gi := range rf.Groups {
		for ri := range rf.Groups[gi].Rules {
			r := &rf.Groups[gi].Rules[ri]
			if r.Alert == "" {
				t.Errorf("%s: a rule without an alert name (recording rules belong elsewhere)", file)
				continue
			}
			names = append(names, r.Alert)
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: %s: for %q; give it a duration, so that one bad scrape does not page", file, r.Alert, r.For)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: %s: severity %q; want critical (wake someone) or warning (look today)", file, r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: %s: no summary annotation", file, r.Alert)
			}
			if d := r.Annotations["description"]; !strings.Contains(d, "First:") {
				t.Errorf("%s: %s: the description does not say what to look at first (\"First: ...\"): %q", file, r.Alert, d)
			}
			r.Annotations = nil
		}
	}
	return names
}

// checkCoverage checks testFile tests the rules of file only, and every
// alert of alerts firing and not firing: an alertname misspelt in a test
// that expects nothing would pass unseen.
func checkCoverage(t *testing.T, testFile, file string, alerts []string, rt *ruleTests) {
	t.Helper()
	if !slices.Equal(rt.RuleFiles, []string{file}) {
		t.Errorf("%s: rule_files %q; want [%s]", testFile, rt.RuleFiles, file)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tg := range rt.Tests {
		for _, at := range tg.AlertRuleTest {
			if !slices.Contains(alerts, at.Alertname) {
				t.Errorf("%s: test %q: no alert %s in %s", testFile, tg.Name, at.Alertname, file)
			}
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] || !quiet[a] {
			t.Errorf("%s: %s is tested firing: %v, not firing: %v; want both", testFile, a, fires[a], quiet[a])
		}
	}
}

// TestAlertRuleTestsCatchABrokenRule: the promtool tests fail when a
// rule no longer fires where it should (a threshold ten times too high).
func TestAlertRuleTestsCatchABrokenRule(t *testing.T) {
	promtool := depstest.Promtool(t)
	var rf ruleFile
	readYAML(t, "alerts/tasks.rules.yml", &rf)
	checkRules(t, "tasks.rules.yml", &rf)
	broken := 0
	for gi := range rf.Groups {
		for ri, r := range rf.Groups[gi].Rules {
			if r.Alert == "TasksHighErrorRate" {
				rf.Groups[gi].Rules[ri].Expr = strings.Replace(r.Expr, "> 0.05", "> 0.5", 1)
				broken++
			}
		}
	}
	if broken != 1 {
		t.Fatalf("TasksHighErrorRate found %d times in tasks.rules.yml; want once", broken)
	}
	dir := t.TempDir()
	b, err := yaml.Marshal(&rf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tasks.rules.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "alerts/tasks.test.yml", filepath.Join(dir, "tasks.test.yml"))
	out, err := promtoolCmd(promtool, dir, "test", "rules", "tasks.test.yml")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(out, "TasksHighErrorRate") {
		t.Fatalf("promtool test rules on a broken rule: %v; want a failure naming TasksHighErrorRate:\n%s", err, out)
	}
}

// runPromtool runs promtool with args in dir and returns its output,
// failing t when it fails.
func runPromtool(t *testing.T, promtool, dir string, args ...string) string {
	t.Helper()
	out, err := promtoolCmd(promtool, dir, args...)
	if err != nil {
		t.Fatalf("promtool %s: %v:\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func promtoolCmd(promtool, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
