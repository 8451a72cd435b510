package replicaexp

import (
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
)

// TestQuickRunEndToEnd runs "hlab lab replica --quick --pairs 2" as a
// user does: every row must be measured, the claim judged and the query
// check made. Whether the claim reproduces is the lab's verdict, not this
// test's.
func TestQuickRunEndToEnd(t *testing.T) {
	var doc struct {
		Experiments []struct {
			Name   string
			Error  string
			Claims []struct {
				Ratio *float64
			}
			Checks []struct {
				Holds bool
			}
			Rows []struct {
				Label         string
				RowsDiffering *int64   `json:"rows_differing"`
				ConvergeS     *float64 `json:"converge_s"`
				RPS           *float64 `json:"rps"`
				P99MS         *float64 `json:"p99_ms"`
				Figures       map[string]float64
			}
			Env map[string]string
		}
	}
	out, _ := labtest.RunCLI(t, "replica", &doc, "--quick", "--pairs", "2")
	if len(doc.Experiments) != 1 || doc.Experiments[0].Error != "" {
		t.Fatalf("experiments: %+v\n%s", doc.Experiments, out)
	}
	e := doc.Experiments[0]
	if len(e.Claims) != 1 || e.Claims[0].Ratio == nil {
		t.Fatalf("claim not judged: %+v", e.Claims)
	}
	if len(e.Checks) != 1 || !e.Checks[0].Holds {
		t.Errorf("the query check: %+v", e.Checks)
	}
	rows := map[string]int{}
	for i, r := range e.Rows {
		rows[r.Label] = i
		if strings.HasPrefix(r.Label, "fault: ") {
			if r.RowsDiffering == nil || *r.RowsDiffering != 0 || r.ConvergeS == nil || *r.ConvergeS <= 0 {
				t.Errorf("fault row %q: rows_differing %v, converge_s %v", r.Label, r.RowsDiffering, r.ConvergeS)
			}
			continue
		}
		// Rows with no latency distribution: the micro-benchmark's (ns/op
		// and ratios) and the mean of catalog rows.
		switch {
		case strings.HasPrefix(r.Label, microPrefix):
			if r.Figures["ns_per_op"] <= 0 && r.Figures["ratio"] <= 0 {
				t.Errorf("micro-benchmark row %q: no ns/op or ratio: %v", r.Label, r.Figures)
			}
		case r.Label == catalogAvgLabel:
			if r.RPS == nil {
				t.Errorf("row %q has no rps", r.Label)
			}
		case r.P99MS == nil:
			t.Errorf("row %q has no p99", r.Label)
		}
	}
	want := []string{catalogListLabel, helloLabel, pricingBefore, pricingAfter, catalogPGLabel, freshLabLabel, freshSvcLabel, faultConnKilled, faultPGRestart, faultSlotLost,
		catalogAvgLabel, catalogMongoLabel, freshMongoQuietLabel, freshMongoLabel,
		microLabel(microMongo), microLabel(microRedis), microLabel(microReplica), microRatioLabel("MongoDB stand-in"), microRatioLabel("Redis")}
	for _, c := range catalogConns {
		want = append(want, catalogLabel(c))
	}
	for _, l := range want {
		if _, ok := rows[l]; !ok {
			t.Errorf("no row %q", l)
		}
	}
	if q := e.Rows[rows[pricingBefore]].Figures["queries_per_request"]; q != 8 {
		t.Errorf("pricing from Postgres: %v queries per request, want 8", q)
	}
	if q := e.Rows[rows[pricingAfter]].Figures["queries_per_request"]; q != 1 {
		t.Errorf("pricing from the replica: %v queries per request, want 1", q)
	}
	if e.Env["mongo"] == "" || !strings.Contains(e.Env["mongo"], "stand-in") {
		t.Errorf("the run did not record the MongoDB stand-in as one: %q", e.Env["mongo"])
	}
	if e.Env["postgres_settings"] == "" {
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
	rows := map[string]bool{}
	for _, r := range res.Rows {
		rows[r.Label] = true
	}
	if !rows[faultConnKilled] || rows[faultPGRestart] || rows[faultSlotLost] {
		t.Errorf("fault rows: %v", rows)
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
		if c.Verdict == lab.Invalid {
			t.Errorf("claim %q invalid: %s", c.Claim, c.Why)
		}
	}
	if left := labtest.PostgresLeftovers(t, url); len(left) > 0 {
		t.Errorf("left on the server: %v", left)
	}
}
