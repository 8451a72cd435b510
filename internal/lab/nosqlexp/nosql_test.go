package nosqlexp

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/activities"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

func TestSpec(t *testing.T) { labtest.SpecValid(t, New()) }

// TestPlan: every row names a service that runs, and the claims' rows
// (measured together) write to distinct tables, so each row's count is
// its own.
func TestPlan(t *testing.T) {
	specs := map[string]serviceSpec{}
	for _, sp := range serviceSpecs {
		specs[sp.key] = sp
	}
	for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
		t.Run(string(mode), func(t *testing.T) {
			for _, r := range otherRows(lab.Options{Mode: mode}) {
				if _, ok := specs[r.svc]; !ok {
					t.Errorf("row %q uses service %q, which does not run", r.key, r.svc)
				}
			}
		})
	}
	tables := map[string]labresult.Key{}
	for _, r := range claimRows {
		sp, ok := specs[r.svc]
		if !ok {
			t.Fatalf("claim row %q uses service %q, which does not run", r.key, r.svc)
		}
		tab := sp.db + "/" + sp.table
		if other, dup := tables[tab]; dup {
			t.Errorf("claim rows %q and %q write to the same table %s", other, r.key, tab)
		}
		tables[tab] = r.key
	}
}

// TestFirstClaimOnTheReportsSetup: the first claim's rows load services
// on the report's tables, and the Spec declares the tables, inserts and
// database settings those services run with as the report's, not as
// differences; the run then holds what really runs to these declarations
// (Run.UsedInFirstClaim, reached in the short run of
// TestQuickRunEndToEnd).
func TestFirstClaimOnTheReportsSetup(t *testing.T) {
	spec := New().Spec(lab.Options{Mode: lab.Quick})
	specs := map[string]serviceSpec{}
	for _, sp := range serviceSpecs {
		specs[sp.key] = sp
	}
	c := spec.Claims[0]
	for _, r := range claimRows {
		if r.key != c.Num && r.key != c.Den {
			continue
		}
		if sp := specs[r.svc]; !sp.firstClaim || sp.cfg.Schema != activities.SchemaReport {
			t.Errorf("claim 1's row %q loads %q: first claim %v, schema %q; want the report's", r.key, r.svc, sp.firstClaim, sp.cfg.Schema)
		}
	}
	for _, item := range []string{itemPGTable, itemPGInsert, itemPGSettings, itemCasTable, itemCasInsert, itemCasAuth, itemCasCommitlog, itemCasTokens, itemPGVersion} {
		i := slices.IndexFunc(spec.Setup, func(s labresult.Setup) bool { return s.Item == item })
		if i < 0 || !spec.Setup[i].FirstClaim || spec.Setup[i].Differs() {
			t.Errorf("setup item %q: want it declared for the first claim as the report's", item)
		}
	}
	if !strings.Contains(activities.ReportPostgresTable, "id varchar primary key") || strings.Contains(strings.ToLower(activities.ReportPostgresTable), "index") {
		t.Errorf("the report's Postgres table is %q", activities.ReportPostgresTable)
	}
}

// requireCassandra skips the test when Cassandra cannot run here, unless
// HLAB_REQUIRE_DEPS says it must.
func requireCassandra(t *testing.T) {
	t.Helper()
	if os.Getenv("HLAB_TEST_CASSANDRA") == "skip" {
		t.Skip("HLAB_TEST_CASSANDRA=skip")
	}
	if s, err := deps.CheckCassandra(); err != nil || s.JavaErr != nil || (!s.Cached && s.MavenErr != nil) {
		if os.Getenv("HLAB_REQUIRE_DEPS") == "" {
			t.Skipf("cassandra cannot run here: %v %v", err, s.JavaErr)
		}
	}
}

// stored checks that every row was measured and stored every write it
// acknowledged.
func stored(t *testing.T, rows []*labresult.Row) {
	t.Helper()
	for _, r := range rows {
		if r.RPS == nil || *r.RPS <= 0 || r.Acked == nil || r.Stored == nil || *r.Acked == 0 || *r.Acked != *r.Stored {
			t.Errorf("row %q: rps %v, acked %v, stored %v", r.Key, r.RPS, r.Acked, r.Stored)
		}
	}
}

// TestQuickRunEndToEnd runs "hlab lab nosql --quick --pairs 2" as a user
// does: both real databases to the end, every declared row measured,
// every row's acknowledged writes equal to the rows stored, every claim
// and shown ratio read, and no error: the first claim's services ran the
// setup the Spec declares (an undeclared difference fails the run). Whether the claims reproduce is the lab's
// verdict, not this test's.
func TestQuickRunEndToEnd(t *testing.T) {
	requireCassandra(t)
	var doc labresult.Document
	out, _ := labtest.RunCLI(t, "nosql", &doc, "--quick", "--pairs", "2")
	if len(doc.Experiments) != 1 {
		t.Fatalf("%d experiments in the JSON", len(doc.Experiments))
	}
	res := doc.Experiments[0]
	if res.Error != "" || res.Ratio == nil {
		t.Fatalf("error %q, ratio %v\n%s", res.Error, res.Ratio, out)
	}
	labtest.Measured(t, New(), lab.Options{Mode: lab.Quick}, res)
	if len(res.Setup) != len(setup()) {
		t.Errorf("the result carries %d setup items, want the Spec's %d", len(res.Setup), len(setup()))
	}
	stored(t, res.Rows)
	for _, k := range []labresult.Key{pgB12, casB12} {
		if r := res.Row(k); r != nil && r.Get(meanBatchRows) == nil {
			t.Errorf("row %q: no %s", k, meanBatchRows.Name)
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
	requireCassandra(t)
	url, cassandra := labtest.DepsUp(t, "postgres"), labtest.DepsUp(t, "cassandra")
	res := labtest.RunQuickWith(t, New(), lab.External{Postgres: url, Cassandra: cassandra})
	labtest.ExternalEnv(t, res.Env, "postgres", labtest.URLPassword(t, url))
	labtest.ExternalEnv(t, res.Env, "cassandra", "")
	if !strings.Contains(res.Env["cassandra"], cassandra) || !strings.Contains(res.Env["cassandra"], "("+deps.CassandraVersion) {
		t.Errorf("env cassandra = %q: want %s and its version %s", res.Env["cassandra"], cassandra, deps.CassandraVersion)
	}
	stored(t, res.Rows)
	if left := labtest.PostgresLeftovers(t, url); len(left) > 0 {
		t.Errorf("left on postgres: %v", left)
	}
	if left := labtest.CassandraLeftovers(t, cassandra); len(left) > 0 {
		t.Errorf("left on cassandra: %v", left)
	}
}
