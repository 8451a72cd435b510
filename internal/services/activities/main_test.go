package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/activities"
)

// The package's tests share one Postgres (started on first use, in a
// sandbox of its own) and depstest's Cassandra node. Tests that stop a
// database run alone (no t.Parallel here).
var (
	pgOnce sync.Once
	pgSB   *sandbox.Sandbox
	pg     *deps.Postgres
	pgDSN  string
	pgErr  error
)

// testKeyspace is the Cassandra keyspace of the package's tests.
const testKeyspace = "activities_test"

func TestMain(m *testing.M) {
	code := depstest.Run(m)
	if pg != nil {
		pg.Stop()
	}
	if pgSB != nil {
		pgSB.Close()
	}
	os.Exit(code)
}

func postgres(t testing.TB) *deps.Postgres {
	t.Helper()
	if _, _, err := deps.FindPostgres(); err != nil {
		if os.Getenv("HLAB_REQUIRE_DEPS") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	pgOnce.Do(func() {
		if pgSB, pgErr = sandbox.New(); pgErr != nil {
			return
		}
		if pg, pgErr = deps.StartPostgres(context.Background(), pgSB, deps.PostgresConfig{}); pgErr != nil {
			return
		}
		if pgErr = pg.CreateDatabase(context.Background(), "activities"); pgErr == nil {
			pgDSN = pg.DSN("activities")
		}
	})
	if pgErr != nil {
		t.Fatalf("postgres: %v", pgErr)
	}
	if err := pg.StartServer(context.Background()); err != nil {
		t.Fatalf("postgres: start again after an earlier test stopped it: %v", err)
	}
	return pg
}

// eachStore runs fn against a real Postgres and a real Cassandra.
func eachStore(t *testing.T, fn func(t *testing.T, store string)) {
	for _, store := range []string{activities.Postgres, activities.Cassandra} {
		t.Run(store, func(t *testing.T) { fn(t, store) })
	}
}

// env is a service on store, served through the shared server (so
// /healthz and /metrics are there).
type env struct {
	t   testing.TB
	svc *activities.Service
	srv *httptest.Server
}

func newEnv(t testing.TB, store string, mutate func(*activities.Config)) *env {
	t.Helper()
	cfg := activities.Config{Store: store, Keyspace: testKeyspace, Timeout: 2 * time.Second}
	switch store {
	case activities.Postgres:
		postgres(t)
		cfg.DSN = pgDSN
	case activities.Cassandra:
		cfg.Cassandra = depstest.Cassandra(t).Addr
	}
	if mutate != nil {
		mutate(&cfg)
	}
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc, err := activities.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.Handler(server.Config{Name: "activities", Registry: reg, Ready: svc.Ready}, svc.Handler()))
	t.Cleanup(func() { srv.Close(); svc.Close() })
	return &env{t: t, svc: svc, srv: srv}
}

// do sends a request and returns the status, the body and how long it took.
func (e *env) do(method, path, contentType string, body []byte) (int, []byte, time.Duration) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	start := time.Now()
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, b, time.Since(start)
}

func (e *env) post(body string) (int, []byte, time.Duration) {
	e.t.Helper()
	return e.do("POST", "/activities", "application/json", []byte(body))
}

func (e *env) history(user string) []activities.Activity {
	e.t.Helper()
	code, body, _ := e.do("GET", "/activities?user_id="+user+"&limit=100", "", nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET /activities?user_id=%s: %d %s", user, code, body)
	}
	var h activities.History
	if err := json.Unmarshal(body, &h); err != nil {
		e.t.Fatalf("history: %v: %s", err, body)
	}
	return h.Activities
}

// sameJSON reports whether a and b hold the same JSON value (Postgres's
// jsonb normalizes spacing and key order).
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}
