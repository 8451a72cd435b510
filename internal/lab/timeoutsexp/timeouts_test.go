package timeoutsexp

import (
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
)

// TestPlans checks each mode's plan: the rows the claims compare are
// measured (and run in rounds), every setup appears in the open model,
// and quick mode fits in about 5 minutes.
func TestPlans(t *testing.T) {
	for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
		t.Run(string(mode), func(t *testing.T) {
			o := lab.Options{Mode: mode}
			labels := map[string]bool{}
			open := map[string]bool{}
			for _, st := range plan(o) {
				if st.conns > 0 {
					labels[closedLabel(st.s, st.conns)] = true
					continue
				}
				labels[openLabel(st.s)] = true
				open[st.s.key] = true
				if st.from <= 0 || st.from >= st.to || st.to > st.run {
					t.Errorf("%s: sampling window %v-%v outside the run of %v", st.s.key, st.from, st.to, st.run)
				}
			}
			claimRows := map[string]bool{}
			for _, st := range plan(o) {
				if st.isClaim() {
					if st.conns > 0 {
						claimRows[closedLabel(st.s, st.conns)] = true
					} else {
						claimRows[openLabel(st.s)] = true
					}
				}
			}
			labtest.ClaimsMeasured(t, New(), labels)
			for _, c := range New().Claims() {
				if !claimRows[c.Numerator] || !claimRows[c.Denominator] {
					t.Errorf("claim %q compares rows that do not run in rounds", c.Text)
				}
			}
			for _, s := range setups {
				if !open[s.key] {
					t.Errorf("setup %s is not measured in the open model", s.key)
				}
			}
			if mode == lab.Quick {
				if est := New().Estimate(o); est > 5*time.Minute {
					t.Errorf("quick estimate %v, over about 5 minutes", est)
				}
			}
		})
	}
}

// TestQuickRun runs "hlab lab timeouts --quick --pairs 2" for real (about
// 3 minutes) and checks the JSON: every row measured, memory sampled,
// both claims judged from their pairs. Whether they reproduce is the
// lab's verdict, not this test's.
func TestQuickRun(t *testing.T) {
	var doc struct {
		Experiments []struct {
			Name   string `json:"name"`
			Claims []struct {
				Ratio *float64 `json:"ratio"`
				Pairs int      `json:"pairs"`
			} `json:"claims"`
			Rows []struct {
				Label     string             `json:"label"`
				RPS       *float64           `json:"rps"`
				P95MS     *float64           `json:"p95_ms"`
				HeapMBAvg *float64           `json:"heap_mb_avg"`
				RSSMBAvg  *float64           `json:"rss_mb_avg"`
				Figures   map[string]float64 `json:"figures"`
			} `json:"rows"`
		} `json:"experiments"`
	}
	out, b := labtest.RunCLI(t, "timeouts", &doc, "--quick", "--pairs", "2")
	if len(doc.Experiments) != 1 || doc.Experiments[0].Name != "timeouts" {
		t.Fatalf("experiments: %s", b)
	}
	e := doc.Experiments[0]
	if len(e.Claims) != 2 || e.Claims[0].Ratio == nil || e.Claims[1].Ratio == nil || e.Claims[0].Pairs != 2 || e.Claims[1].Pairs != 2 {
		t.Errorf("claims not judged: %s", b)
	}
	if want := len(plan(lab.Options{Mode: lab.Quick})); len(e.Rows) != want {
		t.Errorf("%d rows, want %d", len(e.Rows), want)
	}
	for _, r := range e.Rows {
		if r.RPS == nil || r.P95MS == nil || r.RSSMBAvg == nil {
			t.Errorf("row %q misses a figure", r.Label)
		}
		if strings.Contains(r.Label, "open") && r.HeapMBAvg == nil {
			t.Errorf("open-model row %q has no heap figure", r.Label)
		}
		if strings.Contains(r.Label, "hedge") && strings.Contains(r.Label, "open") {
			if _, ok := r.Figures["extra_back_requests"]; !ok {
				t.Errorf("hedge row without the extra load on the back: %v", r.Figures)
			}
		}
	}
	if !strings.Contains(string(out), "Scoreboard") || !strings.Contains(string(out), "REPRODUCED") && !strings.Contains(string(out), "INCONCLUSIVE") {
		t.Errorf("no verdict in the output:\n%s", out)
	}
}
