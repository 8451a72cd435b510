package replicaexp

import (
	"math"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
)

// TestShortRun runs the experiment with its runs shortened: every row
// of its Spec measured, the claim's ratio and every target read; the
// replica converges with no row differing after each fault, the pricing
// rows count 8 and 1 DB queries per request, and a row that does not
// decode is reported and skipped. Whether the claim reproduces, and the
// speed and freshness targets hold, is the lab's verdict, not this test's.
func TestShortRun(t *testing.T) {
	res := labtest.RunQuick(t, New())
	for _, f := range allFaults {
		r := res.Row(f.key)
		if r == nil {
			continue // Measured said so
		}
		if r.RowsDiffering == nil || *r.RowsDiffering != 0 || r.ConvergeS == nil || *r.ConvergeS <= 0 {
			t.Errorf("fault row %q: rows_differing %v, converge_s %v", f.key, r.RowsDiffering, r.ConvergeS)
		}
	}
	for _, s := range microStores {
		if r := res.Row(s.key); r != nil && r.Value(nsPerOp) <= 0 {
			t.Errorf("micro-benchmark row %q: no ns/op: %v", s.key, r.Figures)
		}
		if r := res.Row(s.ratioKey); s.ratioKey != "" && r != nil && r.Value(storeRatio) <= 0 {
			t.Errorf("micro-benchmark row %q: no ratio: %v", s.ratioKey, r.Figures)
		}
	}
	if r := res.Row(catalogProdKey); r != nil && (r.Model != "open" || math.Abs(r.Rate-productionPerMin/60.0) > 0.01 || r.MeanMS == nil || r.CPUAvg == nil) {
		t.Errorf("production row: model %q at %v req/s, mean %v, cpu %v: want the open model at %d a minute, its mean and CPU", r.Model, r.Rate, r.MeanMS, r.CPUAvg, productionPerMin)
	}
	for _, key := range []labresult.Key{catalogKey(compareConns), catalogListKey} {
		if r := res.Row(key); r != nil {
			t.Logf("%s: %.1f bytes per row, %.2f MB", key, r.Value(bytesPerRow), r.Value(replicaMB))
			if r.Value(bytesPerRow) <= 0 || r.Value(replicaMB) <= 0 {
				t.Errorf("%s: %v bytes per row, %v MB: want the replica's memory", key, r.Value(bytesPerRow), r.Value(replicaMB))
			}
		}
	}
	for key, want := range map[labresult.Key]float64{pricingBeforeKey: 8, pricingAfterKey: 1} {
		if r := res.Row(key); r != nil && r.Value(queriesPerRequest) != want {
			t.Errorf("%s: %v queries per request, want %v", key, r.Value(queriesPerRequest), want)
		}
	}
	for _, tr := range res.Targets {
		if (tr.Key == "pricing-queries" || strings.HasPrefix(string(tr.Key), "bad-input-")) && tr.Verdict != labresult.Holds {
			t.Errorf("target %s: %s (value %v, %s)", tr.Key, tr.Verdict, tr.Value, tr.Why)
		}
	}
	for _, v := range startVariants {
		if r := res.Row(v.key); r != nil && (r.Value(readyMaxS) <= 0 || r.Value(readyMedianS) > r.Value(readyMaxS) || r.MaxMS == nil) {
			t.Errorf("%s: ready median %v s, last %v s, the serving instance's slowest request %v ms", v.key, r.Value(readyMedianS), r.Value(readyMaxS), r.MaxMS)
		}
	}
	if !strings.Contains(res.Env["mongo"], "stand-in") {
		t.Errorf("the run did not record the MongoDB stand-in as one: %q", res.Env["mongo"])
	}
	if res.Env["postgres_settings"] == "" {
		t.Error("the run did not record Postgres's settings")
	}
}

// TestExternalPostgres runs the experiment, its runs shortened, against
// a Postgres started by "hlab deps up postgres", given as --postgres
// gives it, as a remote server would be: the run
// records the server, skips the fault rows that would restart it or
// change its settings (and says why), and leaves the server running with
// none of its databases, slots or publications.
func TestExternalPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the experiment")
	}
	url := labtest.DepsUp(t, "postgres")
	res := labtest.RunQuickWith(t, New(), lab.External{Postgres: url})
	labtest.ExternalEnv(t, res.Env, "postgres", labtest.URLPassword(t, url))
	if res.Row(faultConnKilled) == nil || res.Row(faultPGRestart) != nil || res.Row(faultSlotLost) != nil {
		t.Errorf("fault rows: want only %s, got %v, %v, %v", faultConnKilled, res.Row(faultConnKilled) != nil, res.Row(faultPGRestart) != nil, res.Row(faultSlotLost) != nil)
	}
	skipped := 0
	for _, n := range res.NotRerun {
		if strings.Contains(n.Why, lab.ExternalReason) {
			skipped++
		}
	}
	if skipped != 2 {
		t.Errorf("%d figures not rerun for an external server, want 2: %+v", skipped, res.NotRerun)
	}
	for _, c := range res.Claims {
		if c.Verdict == labresult.Invalid {
			t.Errorf("claim %q invalid: %s", c.Claim, c.Why)
		}
	}
	if left := labtest.PostgresLeftovers(t, url); len(left) > 0 {
		t.Errorf("left on the server: %v", left)
	}
}
