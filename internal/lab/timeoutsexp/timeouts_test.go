package timeoutsexp

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/internal/services/frontend"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

func TestSpec(t *testing.T) { labtest.SpecValid(t, New()) }

// TestPlans checks each mode's plan: its rows are the Spec's, between the
// front at rest and the fault rows, the rows the claims compare run in
// rounds, every setup appears in the open model with its sampling window
// inside the run, and quick mode fits in its budget.
func TestPlans(t *testing.T) {
	for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
		t.Run(string(mode), func(t *testing.T) {
			o := lab.Options{Mode: mode}
			spec := New().Spec(o)
			steps := plan(o)
			if want := 1 + len(steps) + len(faults); len(spec.Rows) != want {
				t.Fatalf("%d rows declared, want %d: the front at rest, %d steps and %d fault rows", len(spec.Rows), want, len(steps), len(faults))
			}
			if spec.Rows[0].Key != idleKey {
				t.Errorf("the first row is %q, want the front at rest", spec.Rows[0].Key)
			}
			inRounds := map[labresult.Key]bool{}
			open := map[string]bool{}
			for i, st := range steps {
				if st.key() != spec.Rows[1+i].Key {
					t.Errorf("step %d measures %q, the Spec declares %q there", i, st.key(), spec.Rows[1+i].Key)
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
				if est := New().Estimate(o); est > quickBudget {
					t.Errorf("quick estimate %v, over its budget of %v", est, quickBudget)
				}
			}
		})
	}
}

// quickBudget is what quick mode may take: the estimate before the front
// at rest and the fault rows (4 min 14 s), and a minute for them.
const quickBudget = 5*time.Minute + 15*time.Second

// TestShortRun runs the experiment over two pairs (about 3 minutes: the
// rows' sampling windows keep their runs as long as in quick mode) and
// checks that every row was measured, with its memory sampled, the front
// at rest with its heap, every fault row with its success ratio and p99
// (the domino rows with the slow node's health checks and share), and
// the claims, the targets and the ratios read; the run itself fails
// when what the first claim's rows ran with is not the Spec's setup.
// Whether claims and targets hold is the lab's verdict, not this test's.
func TestShortRun(t *testing.T) {
	res := labtest.RunQuick(t, New())
	for _, c := range res.Claims {
		if c.Pairs != 2 {
			t.Errorf("claim %q: %d pairs, want the 2 the test asked for", c.Claim, c.Pairs)
		}
	}
	for _, r := range res.Rows {
		switch r.Model {
		case "idle":
			if r.HeapMBAvg == nil || r.RSSMBAvg == nil || r.RPS != nil || r.SuccessRatio != nil {
				t.Errorf("the front at rest: heap %v, rss %v, and no rate or success (rps %v, success %v)", r.HeapMBAvg, r.RSSMBAvg, r.RPS, r.SuccessRatio)
			}
		case "fault":
			if r.SuccessRatio == nil || r.P99MS == nil || r.Requests == 0 {
				t.Errorf("fault row %q: success %v, p99 %v over %d requests", r.Key, r.SuccessRatio, r.P99MS, r.Requests)
			}
		default:
			if r.RPS == nil || r.P95MS == nil || r.RSSMBAvg == nil {
				t.Errorf("row %q misses a figure: rps %v, p95 %v, rss %v", r.Key, r.RPS, r.P95MS, r.RSSMBAvg)
			}
			if r.Model == "open" && r.HeapMBAvg == nil {
				t.Errorf("open-model row %q has no heap figure", r.Key)
			}
		}
	}
	if res.Row(openHedge).Get(extraBackRequests) == nil {
		t.Errorf("hedge row without the extra load on the back: %v", res.Row(openHedge).Figures)
	}
	for _, f := range faults {
		r := res.Row(f.key())
		if f.kind != domino || r == nil {
			continue
		}
		// Every health check answers 200 while the node is slow: the
		// premise of the domino effect, measured, not assumed.
		if ok := r.Get(healthChecksOK); ok == nil || *ok != 1 {
			t.Errorf("%s: health checks answered 200: %v, want all", f.key(), ok)
		}
		if share := r.Value(slowNodeShare); share < 0.2 || share > 0.5 {
			t.Errorf("%s: the slow node got %.2f of the calls, want about 1 in %d", f.key(), share, dominoNodes)
		}
	}
	if n := labresult.FirstClaimDifferences(res.Setup); n == 0 || len(res.Setup) != len(New().Spec(lab.Options{Mode: lab.Quick}).Setup) {
		t.Errorf("the result's setup: %d items, %d differing in the first claim's rows", len(res.Setup), n)
	}
}

// TestFirstClaimCommandLines: the command lines the first claim's back
// and fronts are started with, parsed as "hlab serve" parses them, carry
// the setup the Spec declares as ours: a flag that drifts from the
// declaration (or a default that changes under it) fails here, before any
// run.
func TestFirstClaimCommandLines(t *testing.T) {
	for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
		ours := map[string]string{}
		for _, e := range New().Spec(lab.Options{Mode: mode}).Setup {
			ours[e.Item] = e.Ours
		}
		for policy, item := range map[frontend.Policy]string{frontend.None: itemFrontNone, frontend.Timeout: itemFrontTimeout} {
			var fc frontend.Config
			fs := flag.NewFlagSet("frontend", flag.ContinueOnError)
			fc.RegisterFlags(fs)
			if err := fs.Parse(claimFront(policy, "http://127.0.0.1:9/").Args()); err != nil {
				t.Fatal(err)
			}
			if got := frontText(fc); got != ours[item] {
				t.Errorf("%s: the %s front runs with %q, the Spec declares %q", mode, policy, got, ours[item])
			}
			if got := inflightText(fc); got != ours[itemInflight] {
				t.Errorf("%s: the %s front runs with %q, the Spec declares %q", mode, policy, got, ours[itemInflight])
			}
			if got := connText(fc); got != ours[itemConns] {
				t.Errorf("%s: the %s front runs with %q, the Spec declares %q", mode, policy, got, ours[itemConns])
			}
		}
		var bc backend.Config
		fs := flag.NewFlagSet("backend", flag.ContinueOnError)
		bc.RegisterFlags(fs)
		if err := fs.Parse(backArgs(claimBack())); err != nil {
			t.Fatal(err)
		}
		if got := backText(bc); got != ours[itemBack] {
			t.Errorf("%s: the back runs with %q, the Spec declares %q", mode, got, ours[itemBack])
		}
	}
}
