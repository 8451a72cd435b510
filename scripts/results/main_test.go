package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublishedResultsMatchTheRun is the guard on the repository's own
// docs: README.md's results and docs/results/README.md are what the
// command in the README's marker makes of the committed JSON.
func TestPublishedResultsMatchTheRun(t *testing.T) {
	if err := check(filepath.Join("..", "..")); err != nil {
		t.Fatal(err)
	}
}

// A run with what the scoreboard shows: a claim that holds, one whose
// row failed its integrity gate, a target with a unit and a spread, and
// an experiment that did not finish.
const run1 = `{"machine": {"cpus": 2, "cpu_quota": "cgroup-v2", "go": "go1.26.8", "os": "linux/amd64", "cpu_model": "Test CPU", "kernel": "6.1.0"},
 "experiments": [
  {"name": "scale", "title": "stateless scaling", "mode": "quick",
   "rows": [{"key": "one/c1", "label": "one instance, 1 connection", "rps": 600}],
   "claims": [
    {"claim": "three serve >= 2x one", "key": "three/one:rps", "ratio": 2.254, "verdict": "reproduced", "ci": [2.031, 2.5], "ci_level": 0.95,
     "pairs": 3, "noisy_pairs": 1, "pair_ratios": [2.1, 2.3, 2.4], "metric": "rps", "numerator": "three", "denominator": "one", "threshold": ">= 2", "report": "450 / 169 = 2.66"},
    {"claim": "a | b", "key": "a/b:rps", "ratio": null, "verdict": "invalid", "metric": "rps", "threshold": ">= 2", "why": "integrity: \"a\" lost 3 writes"}],
   "targets": [{"target": "p99 under 50 ms", "key": "open-p99", "value": 41.23, "unit": "ms", "bound": "<= 50", "verdict": "holds", "spread": [38, 44.1], "metric": "p99_ms", "row": "one/c1"}]},
  {"name": "crud", "title": "a task API", "mode": "quick", "error": "postgres did not start", "rows": [], "claims": []}]}
`

// fixture makes a repository with run1 published, and returns its root.
func fixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for path, body := range map[string]string{
		"docs/results/reference.json": run1,
		"docs/experiments/scale.md":   "# scale\n",
		readmePath:                    "# Project\n\n## Results\n\n" + beginMarker + "-date 2000-01-01 x.json -->\nold\n" + endMarker + "\n\n## After\n",
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code := run([]string{"-root", root, "-date", "2026-11-26", "docs/results/reference.json"}, io.Discard); code != 0 {
		t.Fatalf("publishing the fixture: exit %d", code)
	}
	return root
}

func read(t *testing.T, root, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPublishWritesTheScoreboard(t *testing.T) {
	root := fixture(t)
	readme := read(t, root, readmePath)
	for _, want := range []string{
		"# Project\n\n## Results\n\n" + beginMarker + "-date 2026-11-26 docs/results/reference.json -->\n",
		"The reference run of 2026-11-26 in quick mode on 2 CPUs (Test CPU), linux/amd64 6.1.0, go1.26.8, CPU quotas by cgroup-v2.",
		"| [scale](docs/experiments/scale.md) #1: (the report's setup) three serve >= 2x one | REPRODUCED | 2.25 [2.03, 2.50] | >= 2 | 3 (1 noisy) | 450 / 169 = 2.66 |\n",
		`| [scale](docs/experiments/scale.md) #2: a \| b (INVALID: integrity: "a" lost 3 writes) | INVALID | - | >= 2 | 0 |  |` + "\n",
		"| crud: postgres did not start | FAILED | | | | |\n",
		"| [scale](docs/experiments/scale.md): p99 under 50 ms | HOLDS | 41.2 ms [38.0, 44.1] | <= 50 |\n",
		endMarker + "\n\n## After\n",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks\n%s\nin\n%s", want, readme)
		}
	}
	if strings.Contains(readme, "\nold\n") {
		t.Errorf("the old section is still there:\n%s", readme)
	}
	pg := read(t, root, pagePath)
	for _, want := range []string{
		"<!-- made by go run ./scripts/results -date 2026-11-26 docs/results/reference.json;",
		"[reference.json](reference.json)",
		"scale #1", // the report package's scoreboard
		"target open-p99: p99 under 50 ms\n  HOLDS: 41.2 ms [38.0, 44.1], needs <= 50", // and its table of the experiment
		"FAILED: postgres did not start",
		"## scale\n\nWhat it runs: [the scale experiment](../experiments/scale.md).\n", // a page of its own
		"## crud\n\n```text\n", // none
	} {
		if !strings.Contains(pg, want) {
			t.Errorf("%s lacks %q in\n%s", pagePath, want, pg)
		}
	}
	if err := check(root); err != nil {
		t.Errorf("check right after publishing: %v", err)
	}
}

// TestCheckFailsOnDrift: editing the published results, or the run
// without publishing it again, fails the check and says what to run.
func TestCheckFailsOnDrift(t *testing.T) {
	for _, tt := range []struct {
		name, path, from, to, want string
	}{
		{"verdict edited in the README", readmePath, "| REPRODUCED |", "| INCONCLUSIVE |", "README.md's results differ"},
		{"page edited", pagePath, "FAILED: postgres did not start", "FAILED: nothing", "docs/results/README.md differs"},
		{"run replaced, not published", "docs/results/reference.json", `"ratio": 2.254`, `"ratio": 1.9`, "README.md's results differ"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := fixture(t)
			body := read(t, root, tt.path)
			if !strings.Contains(body, tt.from) {
				t.Fatalf("%s lacks %q", tt.path, tt.from)
			}
			if err := os.WriteFile(filepath.Join(root, tt.path), []byte(strings.Replace(body, tt.from, tt.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			err := check(root)
			if err == nil {
				t.Fatal("check passed")
			}
			for _, want := range []string{tt.want, "go run ./scripts/results -date 2026-11-26 docs/results/reference.json"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	root := fixture(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no date in the file nor given", []string{"docs/results/reference.json"}, "does not record when it ran (a file from an older hlab): give -date YYYY-MM-DD"},
		{"bad date", []string{"-date", "26.11.2026", "docs/results/reference.json"}, "YYYY-MM-DD"},
		{"no file", []string{"-date", "2026-11-26"}, "give one lab run's JSON"},
		{"not a lab run", []string{"-date", "2026-11-26", "docs/experiments/scale.md"}, "not a lab run's JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := read(t, root, readmePath)
			var out strings.Builder
			if code := run(append([]string{"-root", root}, tt.args...), &out); code == 0 {
				t.Fatal("exit 0")
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
			if read(t, root, readmePath) != before {
				t.Error("README.md changed")
			}
		})
	}
	if err := os.WriteFile(filepath.Join(root, readmePath), []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := check(root); !errors.Is(err, errNoMarkers) {
		t.Errorf("README without markers: %v, want errNoMarkers", err)
	}
	if code := run([]string{"-root", root, "-date", "2026-11-26", "docs/results/reference.json"}, io.Discard); code == 0 {
		t.Error("publishing into a README without markers: exit 0")
	}
}
