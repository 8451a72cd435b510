package nosqlexp

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
)

// TestPlan: every row names a service, the claims' rows (measured
// together) write to distinct tables, so each row's count is its own, and
// the claims compare rows that are measured.
func TestPlan(t *testing.T) {
	specs := map[string]serviceSpec{}
	for _, sp := range serviceSpecs {
		specs[sp.key] = sp
	}
	for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
		t.Run(string(mode), func(t *testing.T) {
			labels := map[string]bool{}
			tables := map[string]string{}
			for i, r := range append(slices.Clone(claimRows), otherRows(lab.Options{Mode: mode})...) {
				sp, ok := specs[r.svc]
				if !ok {
					t.Fatalf("row %q uses service %q, which does not run", r.label, r.svc)
				}
				if i < len(claimRows) {
					tab := sp.db + "/" + sp.table
					if other, dup := tables[tab]; dup {
						t.Errorf("claim rows %q and %q write to the same table %s", other, r.label, tab)
					}
					tables[tab] = r.label
				}
				if labels[r.label] {
					t.Errorf("label %q twice", r.label)
				}
				labels[r.label] = true
			}
			labtest.ClaimsMeasured(t, New(), labels)
		})
	}
}

// TestQuickRunEndToEnd runs "hlab lab nosql --quick --pairs 2" as a user
// does: both real databases to the end, every row measured, every row's
// acknowledged writes equal to the rows stored, and the claims judged.
// Whether they reproduce is the lab's verdict, not this test's.
func TestQuickRunEndToEnd(t *testing.T) {
	if os.Getenv("HLAB_TEST_CASSANDRA") == "skip" {
		t.Skip("HLAB_TEST_CASSANDRA=skip")
	}
	if s, err := deps.CheckCassandra(); err != nil || s.JavaErr != nil || (!s.Cached && s.MavenErr != nil) {
		if os.Getenv("HLAB_REQUIRE_DEPS") == "" {
			t.Skipf("cassandra cannot run here: %v %v", err, s.JavaErr)
		}
	}
	var doc struct {
		Experiments []struct {
			Name  string
			Error string
			Ratio *float64
			Env   map[string]string
			Rows  []struct {
				Label  string
				RPS    *float64
				Acked  *int64
				Stored *int64
			}
		}
	}
	out, _ := labtest.RunCLI(t, "nosql", &doc, "--quick", "--pairs", "2")
	if len(doc.Experiments) != 1 {
		t.Fatalf("%d experiments in the JSON", len(doc.Experiments))
	}
	res := doc.Experiments[0]
	if res.Error != "" || res.Ratio == nil {
		t.Fatalf("error %q, ratio %v\n%s", res.Error, res.Ratio, out)
	}
	want := len(claimRows) + len(otherRows(lab.Options{Mode: lab.Quick}))
	if len(res.Rows) != want {
		t.Fatalf("%d rows, want %d", len(res.Rows), want)
	}
	for _, r := range res.Rows {
		if r.RPS == nil || *r.RPS <= 0 || r.Acked == nil || r.Stored == nil || *r.Acked == 0 || *r.Acked != *r.Stored {
			t.Errorf("row %q: rps %v, acked %v, stored %v", r.Label, r.RPS, r.Acked, r.Stored)
		}
	}
	for _, k := range []string{"durability", "postgres_settings", "cassandra_settings", "cassandra-periodic_settings", "warmup"} {
		if res.Env[k] == "" {
			t.Errorf("env lacks %q", k)
		}
	}
}

// TestExternalServers runs the experiment, its runs shortened, against a
// Postgres and a Cassandra started by "hlab deps up", given as --postgres and
// --cassandra give them: every row measured and its writes stored, both
// servers recorded, and both left running with none of the run's
// databases or keyspaces.
func TestExternalServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the experiment")
	}
	if os.Getenv("HLAB_TEST_CASSANDRA") == "skip" {
		t.Skip("HLAB_TEST_CASSANDRA=skip")
	}
	if s, err := deps.CheckCassandra(); err != nil || s.JavaErr != nil || (!s.Cached && s.MavenErr != nil) {
		if os.Getenv("HLAB_REQUIRE_DEPS") == "" {
			t.Skipf("cassandra cannot run here: %v %v", err, s.JavaErr)
		}
	}
	url, cassandra := labtest.DepsUp(t, "postgres"), labtest.DepsUp(t, "cassandra")
	res := labtest.RunQuickWith(t, New(), lab.External{Postgres: url, Cassandra: cassandra})
	labtest.ExternalEnv(t, res.Env, "postgres", labtest.URLPassword(t, url))
	labtest.ExternalEnv(t, res.Env, "cassandra", "")
	if !strings.Contains(res.Env["cassandra"], cassandra) || !strings.Contains(res.Env["cassandra"], "("+deps.CassandraVersion) {
		t.Errorf("env cassandra = %q: want %s and its version %s", res.Env["cassandra"], cassandra, deps.CassandraVersion)
	}
	if want := len(claimRows) + len(otherRows(lab.Options{Mode: lab.Quick})); len(res.Rows) != want {
		t.Fatalf("%d rows, want %d", len(res.Rows), want)
	}
	for _, r := range res.Rows {
		if r.RPS == nil || *r.RPS <= 0 || r.Acked == nil || r.Stored == nil || *r.Acked == 0 || *r.Acked != *r.Stored {
			t.Errorf("row %q: rps %v, acked %v, stored %v", r.Label, r.RPS, r.Acked, r.Stored)
		}
	}
	if left := labtest.PostgresLeftovers(t, url); len(left) > 0 {
		t.Errorf("left on postgres: %v", left)
	}
	if left := labtest.CassandraLeftovers(t, cassandra); len(left) > 0 {
		t.Errorf("left on cassandra: %v", left)
	}
}
