package tasks_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/services/tasks"
)

// crudFlow runs one user's create, update, get, list, delete and checks
// the answers: every switch must keep the API's behaviour.
func crudFlow(t *testing.T, c *client) {
	t.Helper()
	task := c.createTask(map[string]any{"title": "switch"})
	path := fmt.Sprintf("/v1/tasks/%d", task.ID)
	if a := c.do("PATCH", path, map[string]any{"priority": 3}); a.code != 200 {
		t.Fatalf("patch = %s", a)
	}
	var got tasks.Task
	if a := c.do("GET", path, nil); a.code != 200 {
		t.Fatalf("get = %s", a)
	} else {
		a.decode(t, &got)
	}
	if got.Priority != 3 {
		t.Fatalf("priority after patch = %d", got.Priority)
	}
	if a := c.do("GET", "/v1/tasks?sort=-priority", nil); a.code != 200 || !strings.Contains(string(a.body), `"title":"switch"`) {
		t.Fatalf("list = %s", a)
	}
	if a := c.do("DELETE", path, nil); a.code != 204 {
		t.Fatalf("delete = %s", a)
	}
	if a := c.do("GET", path, nil); a.code != 404 {
		t.Fatalf("get after delete = %s", a)
	}
}

func TestSwitchesKeepBehaviour(t *testing.T) {
	for _, tc := range []struct {
		name  string
		deopt tasks.Deopt
	}{
		{"all on", tasks.Deopt{}},
		{"no pool limits", tasks.Deopt{NoPoolLimits: true}},
		{"no indexes", tasks.Deopt{NoIndexes: true}},
		{"default tx", tasks.Deopt{DefaultTx: true}},
		{"user touch", tasks.Deopt{UserTouch: true}},
		{"goroutine per job", tasks.Deopt{GoroutinePerJob: true}},
		{"telemetry uncapped", tasks.Deopt{UncappedTelemetry: true}},
		{"all off", tasks.Deopt{NoPoolLimits: true, UncappedTelemetry: true, NoIndexes: true, DefaultTx: true, UserTouch: true, KeepFileLimit: true, GoroutinePerJob: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *tasks.Config) { c.Deopt = tc.deopt })
			c := e.signup("switch@example.com")
			// Several devices of one user at once: the case the lock bug hurts.
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { crudFlow(t, c) })
			}
			wg.Wait()
			var seen *string
			e.db.QueryRow(t.Context(), "SELECT last_seen_at::text FROM users WHERE id = $1", c.id).Scan(&seen)
			if (seen != nil) != tc.deopt.UserTouch {
				t.Fatalf("last_seen_at = %v: the per-request user update ran %v, want %v", seen, seen != nil, tc.deopt.UserTouch)
			}
			if max := e.metric("tasks_db_pool_max_conns", nil); (max == 0) != tc.deopt.NoPoolLimits {
				t.Fatalf("pool max conns = %v with NoPoolLimits %v", max, tc.deopt.NoPoolLimits)
			}
		})
	}
}

func indexes(t *testing.T, e *env) []string {
	t.Helper()
	rows, err := e.db.Query(t.Context(), `SELECT indexname FROM pg_indexes WHERE indexname IN ('tasks_user_created_idx', 'devices_user_idx', 'task_details_task_id_idx') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// --indexes=false drops the indexes, the GET's join index with the lists';
// the next start with them builds them again.
func TestIndexSwitchMigratesBothWays(t *testing.T) {
	dsn := newDatabase(t)
	on := newEnvOn(t, dsn, nil)
	if got := indexes(t, on); len(got) != 3 {
		t.Fatalf("indexes with --indexes = %v", got)
	}
	off := newEnvOn(t, dsn, func(c *tasks.Config) { c.Deopt.NoIndexes = true })
	if got := indexes(t, off); len(got) != 0 {
		t.Fatalf("indexes with --indexes=false = %v", got)
	}
	rows, err := off.db.Query(t.Context(), `EXPLAIN SELECT id FROM tasks WHERE user_id = 1 ORDER BY created_at DESC LIMIT 20`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "Seq Scan on tasks") {
		t.Fatalf("the list query without indexes plans %q", plan)
	}
	again := newEnvOn(t, dsn, nil)
	if got := indexes(t, again); len(got) != 3 {
		t.Fatalf("indexes after starting with --indexes again = %v", got)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, newDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ms, err := tasks.Migrations()
	if err != nil || len(ms) < 2 {
		t.Fatalf("Migrations = %v, %v", ms, err)
	}
	applied, err := tasks.Migrate(ctx, conn)
	if err != nil || len(applied) != len(ms) {
		t.Fatalf("first Migrate = %v, %v", applied, err)
	}
	if applied, err := tasks.Migrate(ctx, conn); err != nil || len(applied) != 0 {
		t.Fatalf("second Migrate = %v, %v; want nothing to do", applied, err)
	}
	if ok, err := tasks.Revert(ctx, conn, "indexes"); !ok || err != nil {
		t.Fatalf("Revert(indexes) = %v, %v", ok, err)
	}
	if applied, err := tasks.Migrate(ctx, conn); err != nil || len(applied) != 1 || applied[0] != "0002_indexes" {
		t.Fatalf("Migrate after Revert = %v, %v; want 0002_indexes again", applied, err)
	}
	if _, err := tasks.Revert(ctx, conn, "schema"); err == nil {
		t.Fatal("Revert(schema), which has no down migration, succeeded")
	}
	if err := tasks.Seed(ctx, conn, tasks.SeedSpec{Users: 3, TasksPerUser: 4, DevicesPerUser: 2, BcryptCost: 4}); err != nil {
		t.Fatal(err)
	}
	var users, ts, devs, details int
	conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM tasks), (SELECT count(*) FROM devices),
		(SELECT count(DISTINCT task_id) FROM task_details)`).Scan(&users, &ts, &devs, &details)
	if users != 3 || ts != 12 || devs != 6 || details != 12 {
		t.Fatalf("seeded %d users, %d tasks (%d with details), %d devices; want 3, 12 (12), 6", users, ts, details, devs)
	}
}

// Seeded accounts sign in with SeedPassword.
func TestSeededAccountsLogIn(t *testing.T) {
	e := newEnv(t, nil)
	conn, err := e.db.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	err = tasks.Seed(t.Context(), conn.Conn(), tasks.SeedSpec{Users: 2, TasksPerUser: 30, DevicesPerUser: 1, BcryptCost: 4})
	conn.Release()
	if err != nil {
		t.Fatal(err)
	}
	a := e.anon().do("POST", "/v1/auth/login", map[string]string{"email": tasks.SeedEmail(2), "password": tasks.SeedPassword})
	if a.code != 200 {
		t.Fatalf("seeded login = %s", a)
	}
	var s struct{ Token string }
	a.decode(t, &s)
	c := &client{e: e, token: s.Token}
	var page struct{ Tasks []tasks.Task }
	c.do("GET", "/v1/tasks", nil).decode(t, &page)
	if len(page.Tasks) != tasks.DefaultLimit || page.Tasks[0].Title != "Seeded task 30" {
		t.Fatalf("seeded user's first page: %d tasks, first %+v", len(page.Tasks), page.Tasks[0])
	}
}

func TestObservability(t *testing.T) {
	hook := newSink(t, false)
	e := newEnv(t, func(c *tasks.Config) { c.WebhookURL = hook.URL })
	c := e.signup("observed@example.com")
	c.createTask(map[string]any{"title": "measured"})
	a := c.do("GET", "/v1/tasks/999999", nil)
	if len(a.err.TraceID) != 32 {
		t.Errorf("error answer carries trace id %q, want 32 hex digits", a.err.TraceID)
	}
	resp, err := httpClient.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`http_requests_total{code="201",path="POST /v1/tasks"} 1`,
		`http_request_duration_seconds_bucket{path="GET /v1/tasks/{id}"`,
		`tasks_db_pool_conns{state="idle"}`,
		`tasks_db_pool_max_conns 4`,
		`tasks_db_pool_acquires_total`,
		`tasks_notify_queue_depth`,
		`tasks_notify_jobs_total{result="enqueued"}`,
		`tasks_ws_connections 0`,
		`tasks_signups_total 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Profiles are on the admin address only (TestProcessAdminAddr): the
	// public one must not show the command line, --dsn password included.
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/debug/pprof/": http.StatusNotFound, "/debug/pprof/cmdline": http.StatusNotFound, "/debug/pprof/profile": http.StatusNotFound} {
		resp, err := httpClient.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s = %d, want %d", path, resp.StatusCode, want)
		}
	}
}
