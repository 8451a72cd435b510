package labtest

import (
	"context"
	"github.com/highload-lab/hlab/internal/cqlsession"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/testkit"
)

// DepsUp starts the dependency name as a user would before giving it to
// the lab as an external server: with "hlab deps up NAME" (the hlab
// binary, in a state directory of the test's). It returns the connection
// string up printed; "hlab deps down --purge" stops it when the test
// ends.
func DepsUp(t testing.TB, name string) string {
	t.Helper()
	bin := testkit.HlabBinary(t)
	dir := filepath.Join(t.TempDir(), name)
	t.Cleanup(func() {
		if out, errOut, err := testkit.Run(bin, "deps", "down", name, "--purge", "--state-dir", dir); err != nil {
			t.Errorf("hlab deps down %s: %v: %s%s", name, err, out, errOut)
		}
	})
	return strings.TrimSpace(testkit.RunOK(t, bin, "deps", "up", name, "--state-dir", dir))
}

// URLPassword returns the password of a connection URL ("" when none),
// which a report must never show.
func URLPassword(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("connection string %q: %v", raw, err)
	}
	p, _ := u.User.Password()
	return p
}

// PostgresLeftovers returns what a run left on the server at rawURL:
// databases and replication slots named hlab_..., and whether the server
// answered at all (an error when it did not: the lab must not stop it).
func PostgresLeftovers(t testing.TB, rawURL string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		t.Fatalf("the external postgres no longer answers: %v", err)
	}
	defer conn.Close(ctx)
	var out []string
	for _, q := range []string{
		"SELECT 'database ' || datname FROM pg_database WHERE datname LIKE 'hlab%'",
		"SELECT 'slot ' || slot_name FROM pg_replication_slots WHERE slot_name LIKE 'hlab%' OR database LIKE 'hlab%'",
		"SELECT 'publication ' || pubname FROM pg_publication",
		"SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname LIKE 'hlab%'",
		"SELECT 'table ' || tablename FROM pg_tables WHERE schemaname = 'public'",
	} {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, names...)
	}
	return out
}

// KafkaLeftovers returns the topics and groups on brokers named hlab_...
// (failing t when the brokers do not answer).
func KafkaLeftovers(t testing.TB, brokers []string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("the external kafka no longer answers: %v", err)
	}
	var out []string
	for _, n := range topics.Names() {
		if strings.HasPrefix(n, "hlab_") {
			out = append(out, "topic "+n)
		}
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups() {
		if strings.HasPrefix(g, "hlab_") {
			out = append(out, "group "+g)
		}
	}
	return out
}

// CassandraLeftovers returns the keyspaces at addr named hlab_...
func CassandraLeftovers(t testing.TB, addr string) []string {
	t.Helper()
	cl := gocql.NewCluster(addr)
	cl.DisableInitialHostLookup = true
	cl.Timeout = 10 * time.Second
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatalf("the external cassandra no longer answers: %v", err)
	}
	defer cqlsession.Close(s)
	iter := s.Query("SELECT keyspace_name FROM system_schema.keyspaces").Iter()
	var ks string
	var out []string
	for iter.Scan(&ks) {
		if strings.HasPrefix(ks, "hlab_") {
			out = append(out, "keyspace "+ks)
		}
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ExternalEnv checks that env records the external server of dep
// (its entry says "external" and the lab's quota caveat) and no password.
func ExternalEnv(t testing.TB, env map[string]string, dep, password string) {
	t.Helper()
	v := env[dep]
	if !strings.Contains(v, "external") || !strings.Contains(v, deps.ExternalQuotas) {
		t.Errorf("env[%q] = %q: want the external server and %q", dep, v, deps.ExternalQuotas)
	}
	if env["external"] == "" {
		t.Errorf("env lacks \"external\": %v", env)
	}
	if password != "" {
		for k, v := range env {
			if strings.Contains(v, password) {
				t.Errorf("env[%q] shows the password: %s", k, v)
			}
		}
	}
}
