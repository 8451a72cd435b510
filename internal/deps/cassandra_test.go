package deps_test

import (
	"context"
	"github.com/highload-lab/hlab/internal/cqlsession"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
)

func TestRenderCassandraYAML(t *testing.T) {
	y, err := deps.RenderCassandraYAML("/x", 9042, 7000, map[string]string{"commitlog_sync": "batch", "auto_snapshot": "false", "storage_compatibility_mode": "NONE"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"native_transport_port: 9042\n", "storage_port: 7000\n", `seeds: "127.0.0.1:7000"`,
		"commitlog_directory: /x/commitlog\n",
		"auto_snapshot: false\ncommitlog_sync: batch\nstorage_compatibility_mode: NONE\n", // settings last, in key order
	} {
		if !strings.Contains(string(y), want) {
			t.Errorf("cassandra.yaml lacks %q:\n%s", want, y)
		}
	}
	if _, err := deps.RenderCassandraYAML("/x", 1, 2, map[string]string{"a": "b\nc: d"}); err == nil {
		t.Error("a multi-line setting was accepted")
	}
}

// TestCassandraVersions: a Cassandra version the lab does not run is
// refused, naming those it does, before anything starts.
func TestCassandraVersions(t *testing.T) {
	_, err := deps.StartCassandra(context.Background(), depstest.Sandbox(t), deps.CassandraConfig{Version: "3.11.4"})
	if err == nil || !strings.Contains(err.Error(), deps.CassandraVersion) || !strings.Contains(err.Error(), deps.Cassandra40Version) {
		t.Errorf("StartCassandra of 3.11.4: %v, want a refusal naming %s and %s", err, deps.CassandraVersion, deps.Cassandra40Version)
	}
}

// TestCassandra writes and reads through CQL on the shared node, stops
// it (a query fails), starts it again on the same data and reads the row
// back with the same session, which reconnects by itself.
func TestCassandra(t *testing.T) {
	c := depstest.Cassandra(t)
	if c.Settings["commitlog_sync"] != "periodic" || c.Settings["authenticator"] != "AllowAllAuthenticator" || c.User != "" {
		t.Errorf("settings %v, user %q: want Cassandra's defaults, commitlog_sync periodic and no authentication, recorded", c.Settings, c.User)
	}
	if p := c.Proc(); p != nil {
		if s := p.Samples(); len(s) > 0 {
			t.Logf("%s: started in %s, RSS %.0f MB", c.Kind, c.Started.Round(time.Millisecond), s[len(s)-1].RSSMB)
		}
	}
	s, err := c.Session("")
	if err != nil {
		t.Fatal(err)
	}
	defer cqlsession.Close(s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS depstest WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS depstest.kv (k text PRIMARY KEY, v int)",
	} {
		if err := s.Query(q).WithContext(ctx).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.Query("INSERT INTO depstest.kv (k, v) VALUES (?, ?)", "a", 1).WithContext(ctx).Exec(); err != nil {
		t.Fatal(err)
	}

	depstest.StopCassandra(t, c)
	qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
	err = s.Query("SELECT v FROM depstest.kv WHERE k = ?", "a").WithContext(qctx).Scan(new(int))
	qcancel()
	if err == nil {
		t.Fatal("a query succeeded with the node stopped")
	}
	depstest.StartCassandra(t, c)

	var v int
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = s.Query("SELECT v FROM depstest.kv WHERE k = ?", "a").Consistency(gocql.One).WithContext(ctx).Scan(&v)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || v != 1 {
		t.Fatalf("after the restart: v=%d, %v; want 1 from the same session", v, err)
	}
}
