package tasks_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// One real Postgres serves the package's tests; each test gets its own
// database in it.
func TestMain(m *testing.M) {
	if args := os.Getenv(serveChildEnv); args != "" {
		os.Exit(runServeChild(args))
	}
	os.Exit(depstest.Run(m))
}

// env is a service on a fresh database, served through the shared server
// (so /healthz and /metrics are there), with a direct pool for checks.
type env struct {
	t   testing.TB
	svc *tasks.Service
	srv *httptest.Server
	db  *pgxpool.Pool
	dsn string
	// admin is the URL of the admin address, where a process serves
	// /metrics ("" = the service's own, as Handler serves them).
	admin string
}

func newDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", rand.Int64())
	pg := depstest.Postgres(t)
	if err := pg.CreateDatabase(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return pg.DSN(name)
}

func newEnv(t testing.TB, mutate func(*tasks.Config)) *env {
	t.Helper()
	return newEnvOn(t, newDatabase(t), mutate)
}

func newEnvOn(t testing.TB, dsn string, mutate func(*tasks.Config)) *env {
	t.Helper()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	cfg := tasks.Config{
		DatabaseURL: dsn,
		BcryptCost:  4, // the cheapest: tests check behaviour, not hash strength
		TokenSecret: []byte("a test secret of enough bytes"),
		Registry:    reg,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxConns:    4,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	svc, err := tasks.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.Handler(server.Config{Name: "tasks", Registry: reg, Ready: func() error { return svc.Ready(ctx) }}, svc.Handler()))
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := svc.Close(cctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		db.Close()
	})
	return &env{t: t, svc: svc, srv: srv, db: db, dsn: dsn}
}

// client is one signed-in (or anonymous) API user.
type client struct {
	e     *env
	token string
	id    int64
	email string
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// answer is a response with its decoded error, if any.
type answer struct {
	code int
	hdr  http.Header
	body []byte
	err  struct {
		Error   string `json:"error"`
		Reason  string `json:"reason"`
		Field   string `json:"field"`
		TraceID string `json:"trace_id"`
	}
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.code, bytes.TrimSpace(a.body)) }

// decode decodes the body into v or fails the test.
func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
}

// do sends body: a string is sent as is, anything else as JSON; nil sends none.
func (c *client) do(method, path string, body any, hdr ...string) answer {
	c.e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.e.srv.URL+path, rd)
	if err != nil {
		c.e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		c.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	a := answer{code: resp.StatusCode, hdr: resp.Header}
	a.body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		json.Unmarshal(a.body, &a.err)
	}
	return a
}

func (e *env) anon() *client { return &client{e: e} }

// signup makes an account and returns its client.
func (e *env) signup(email string) *client {
	e.t.Helper()
	c := e.anon()
	a := c.do("POST", "/v1/auth/signup", map[string]string{"email": email, "password": "password-of-" + email, "name": "N " + email})
	if a.code != http.StatusCreated {
		e.t.Fatalf("signup %s: %s", email, a)
	}
	var s struct {
		Token string     `json:"token"`
		User  tasks.User `json:"user"`
	}
	a.decode(e.t, &s)
	c.token, c.id, c.email = s.Token, s.User.ID, email
	return c
}

func (c *client) createTask(body any) tasks.Task {
	c.e.t.Helper()
	a := c.do("POST", "/v1/tasks", body)
	if a.code != http.StatusCreated {
		c.e.t.Fatalf("create task: %s", a)
	}
	var t tasks.Task
	a.decode(c.e.t, &t)
	return t
}

// count returns the rows of a table, straight from the database.
func (e *env) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// metric returns the sum of a metric's series that carry labels (every
// series when labels is nil), as the service's /metrics shows them.
func (e *env) metric(name string, labels map[string]string) float64 {
	e.t.Helper()
	return testkit.SumFamily(testkit.Scrape(e.t, cmp.Or(e.admin, e.srv.URL)+"/metrics")[name], labels)
}
