package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
)

// The fixtures of internal/labcompare: a lab run and an edited copy in
// which two verdicts moved.
var (
	runA = filepath.Join("..", "labcompare", "testdata", "a.json")
	runB = filepath.Join("..", "labcompare", "testdata", "b.json")
)

func TestLabCompare(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "notes.txt")
	os.WriteFile(notJSON, []byte("rps 5\n"), 0o644)
	loadJSON := filepath.Join(dir, "load.json")
	os.WriteFile(loadJSON, []byte(`{"requests": 10, "rps": 5, "success_ratio": 1}`), 0o644)
	report := filepath.Join(dir, "cmp")
	tests := []struct {
		name       string
		args       []string
		code       int
		wantOut    string // in stdout
		wantErr    string // in stderr
		wantReport bool
	}{
		{"moved verdicts still exit 0", []string{runA, runB}, 0, "2 verdicts moved: async #1 INCONCLUSIVE → REPRODUCED", "", false},
		{"same run", []string{runA, runA}, 0, "No verdict moved", "", false},
		{"fail on moved", []string{"--fail-on-moved", runA, runB}, 1, "2 verdicts moved", "2 verdicts moved", false},
		{"fail on moved, none moved", []string{runA, runA, "--fail-on-moved"}, 0, "No verdict moved", "", false},
		{"HTML report", []string{runA, runB, "--report", report}, 0, "OUTSIDE spread", "wrote " + filepath.Join(report, "compare.html"), true},
		{"JSON", []string{"--json", runA, runB}, 0, `"moved": [`, "", false},
		{"missing file", []string{runA, filepath.Join(dir, "absent.json")}, 2, "", "no such file", false},
		{"not JSON", []string{notJSON, runB}, 2, "", "not a lab run's JSON", false},
		{"hlab load output", []string{runA, loadJSON}, 2, "", "no experiments", false},
		{"one file", []string{runA}, 2, "", "give two files written by hlab lab --json", false},
		{"three files", []string{runA, runB, runB}, 2, "", "got 3", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(append([]string{"lab", "compare"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if !strings.Contains(stdout, tt.wantOut) || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stdout lacks %q or stderr %q:\nstdout: %.600s\nstderr: %s", tt.wantOut, tt.wantErr, stdout, stderr)
			}
			if tt.code == 2 {
				if !strings.Contains(stderr, "hlab lab --json") {
					t.Errorf("the error does not say what to give: %s", stderr)
				}
				if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 {
					t.Errorf("want a one-line explanation, got %d lines: %q", lines, stderr)
				}
			}
			if tt.wantReport {
				page, err := os.ReadFile(filepath.Join(report, "compare.html"))
				if err != nil || !strings.Contains(string(page), "MOVED") || !strings.Contains(string(page), "INCONCLUSIVE</span> → <span class=\"verdict reproduced\">REPRODUCED") {
					t.Errorf("compare.html (%v) lacks the move", err)
				}
			}
			if tt.name == "JSON" {
				var c struct {
					Moved []struct{ Experiment, From, To string }
				}
				if err := json.Unmarshal([]byte(stdout), &c); err != nil || len(c.Moved) != 2 || c.Moved[0].From != "inconclusive" {
					t.Errorf("JSON: %v, %+v", err, c)
				}
			}
		})
	}
}

func TestLabCompareHelp(t *testing.T) {
	code, _, stderr := run("lab", "compare", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"hlab lab compare A.json B.json", "Example:", "within spread", "--fail-on-moved", "Exit status"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if _, _, stderr := run("lab", "--help"); !strings.Contains(stderr, "hlab lab compare A.json B.json") {
		t.Errorf("hlab lab --help does not point to compare")
	}
}

// TestCompareIsNoExperiment: "compare" is the lab's sub-action, so no
// experiment may take the name, and it must come first.
func TestCompareIsNoExperiment(t *testing.T) {
	for _, e := range experiments() {
		if lab.Name(e) == compareAction {
			t.Errorf("an experiment is named %q, which hlab lab compare shadows", compareAction)
		}
	}
	code, _, stderr := run("lab", "scale", "compare")
	if code != 2 || !strings.Contains(stderr, "comes first") {
		t.Errorf("hlab lab scale compare: exit %d, %s", code, stderr)
	}
}
