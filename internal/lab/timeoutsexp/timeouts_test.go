package timeoutsexp

import (
	"os"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

func TestSpec(t *testing.T) { labtest.SpecValid(t, New()) }

// TestPlans checks each mode's plan: its rows are the Spec's, the rows the
// claims compare run in rounds, every setup appears in the open model
// with its sampling window inside the run, and quick mode fits in about 5
// minutes.
func TestPlans(t *testing.T) {
	for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
		t.Run(string(mode), func(t *testing.T) {
			o := lab.Options{Mode: mode}
			spec := New().Spec(o)
			steps := plan(o)
			if len(steps) != len(spec.Rows) {
				t.Fatalf("%d steps, %d rows declared", len(steps), len(spec.Rows))
			}
			inRounds := map[labresult.Key]bool{}
			open := map[string]bool{}
			for i, st := range steps {
				if st.key() != spec.Rows[i].Key {
					t.Errorf("step %d measures %q, the Spec declares %q there", i, st.key(), spec.Rows[i].Key)
				}
				if st.isClaim() {
					inRounds[st.key()] = true
				}
				if st.conns > 0 {
					continue
				}
				open[st.s.name] = true
				if st.from <= 0 || st.from >= st.to || st.to > st.run {
					t.Errorf("%s: sampling window %v-%v outside the run of %v", st.key(), st.from, st.to, st.run)
				}
			}
			for _, c := range spec.Claims {
				if !inRounds[c.Num] || !inRounds[c.Den] {
					t.Errorf("claim %q compares rows that do not run in rounds", c.Text)
				}
			}
			for _, s := range setups {
				if !open[s.name] {
					t.Errorf("setup %s is not measured in the open model", s.name)
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

// TestShortRun runs the experiment over two pairs (about 3 minutes: the
// rows' sampling windows keep their runs as long as in quick mode) and
// checks that every row was measured, with its memory sampled, and both
// claims, the hedging targets and the ratios read. Whether they hold is
// the lab's verdict, not this test's.
func TestShortRun(t *testing.T) {
	res := labtest.RunQuick(t, New())
	for _, c := range res.Claims {
		if c.Pairs != 2 {
			t.Errorf("claim %q: %d pairs, want the 2 the test asked for", c.Claim, c.Pairs)
		}
	}
	for _, r := range res.Rows {
		if r.RPS == nil || r.P95MS == nil || r.RSSMBAvg == nil {
			t.Errorf("row %q misses a figure: rps %v, p95 %v, rss %v", r.Key, r.RPS, r.P95MS, r.RSSMBAvg)
		}
		if r.Model == "open" && r.HeapMBAvg == nil {
			t.Errorf("open-model row %q has no heap figure", r.Key)
		}
	}
	if res.Row(openHedge).Get(extraBackRequests) == nil {
		t.Errorf("hedge row without the extra load on the back: %v", res.Row(openHedge).Figures)
	}
}
