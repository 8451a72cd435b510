package cli

import (
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
)

// TestEveryExperimentAccountsForItsReport: every experiment lists its
// report's figures, each either rerun (where) or not (why), never both,
// and none twice, in both modes.
func TestEveryExperimentAccountsForItsReport(t *testing.T) {
	for _, e := range experiments() {
		for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
			figs := e.Spec(lab.Options{Mode: mode, Kafka: lab.KafkaFake}).Figures
			if len(figs) < 3 {
				t.Errorf("%s (%s): %d figures of its report accounted for", lab.Name(e), mode, len(figs))
			}
			seen := map[string]bool{}
			for _, f := range figs {
				if f.Figure == "" || (f.Rerun == "") == (f.Why == "") {
					t.Errorf("%s (%s): %+v: want a figure with either where it is rerun or why not", lab.Name(e), mode, f)
				}
				if seen[f.Figure] {
					t.Errorf("%s (%s): %q listed twice", lab.Name(e), mode, f.Figure)
				}
				seen[f.Figure] = true
			}
		}
	}
}

func TestLabListShowsFigures(t *testing.T) {
	code, quick, _ := run("lab", "--list", "timeouts")
	if code != 0 || !strings.Contains(quick, "+ 10% slow, 3 s timeout") || !strings.Contains(quick, "not rerun: rerun in --full") {
		t.Fatalf("lab --list timeouts: exit %d\n%s", code, quick)
	}
	if strings.Contains(quick, "  scale ") {
		t.Errorf("lab --list timeouts lists other experiments:\n%s", quick)
	}
	// --full reruns what quick mode leaves out.
	_, full, _ := run("lab", "--list", "--full", "timeouts")
	if strings.Contains(full, "rerun in --full") {
		t.Errorf("lab --list --full still says 'rerun in --full':\n%s", full)
	}
}
