package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/procfs"
	"github.com/highload-lab/hlab/internal/services/activities"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestAcknowledgedIsReadable: every write answered 200/201 is in the
// user's history, as written, newest first; with and without --batch,
// from POST /activities and from the report's GET /handle.
func TestAcknowledgedIsReadable(t *testing.T) {
	eachStore(t, func(t *testing.T, store string) {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
				e := newEnv(t, store, func(c *activities.Config) { c.Batch = batch })
				user := uuid.NewString()
				base := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
				var posted []activities.Activity
				for i := range 5 {
					ts := base.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano)
					body := fmt.Sprintf(`{"user_id": %q, "timestamp": %q, "data": {"n": %d, "page": "/cart", "tags": ["a", "b"]}}`, user, ts, i)
					code, b, _ := e.post(body)
					if code != http.StatusCreated {
						t.Fatalf("POST %s: %d %s", body, code, b)
					}
					var a activities.Activity
					if err := json.Unmarshal(b, &a); err != nil {
						t.Fatal(err)
					}
					if a.UserID.String() != user || a.ID == uuid.Nil {
						t.Fatalf("POST answered %s", b)
					}
					posted = append(posted, a)
				}
				got := e.history(user)
				if len(got) != len(posted) {
					t.Fatalf("history has %d activities, want the %d acknowledged: %+v", len(got), len(posted), got)
				}
				for i, g := range got {
					want := posted[len(posted)-1-i] // newest first
					if g.ID != want.ID || !g.Time.Equal(want.Time) || !sameJSON(g.Data, want.Data) {
						t.Errorf("history[%d] = %s %s %s, want %s %s %s", i, g.ID, g.Time, g.Data, want.ID, want.Time, want.Data)
					}
				}

				// The report's request: a random activity.
				code, b, _ := e.do("GET", "/handle", "", nil)
				if code != http.StatusOK {
					t.Fatalf("GET /handle: %d %s", code, b)
				}
				var h activities.Activity
				if err := json.Unmarshal(b, &h); err != nil {
					t.Fatal(err)
				}
				if hist := e.history(h.UserID.String()); len(hist) != 1 || hist[0].ID != h.ID || !sameJSON(hist[0].Data, h.Data) {
					t.Fatalf("GET /handle stored %s; history of its user: %+v", b, hist)
				}
				var s string
				if err := json.Unmarshal(h.Data, &s); err != nil || len(s) != 100 {
					t.Errorf("GET /handle data %s: want the JSON of a 100-letter string", h.Data)
				}
			})
		}
	})
}

// TestInvalidRequests: bodies and queries that are wrong get 400 (413,
// 415) with the reason, and nothing is stored.
func TestInvalidRequests(t *testing.T) {
	user := uuid.NewString()
	big := `{"user_id": "` + user + `", "data": "` + strings.Repeat("x", 20<<10) + `"}`
	cases := []struct {
		name, ctype, body string
		code              int
		reason            string
	}{
		{"empty", "application/json", "", 400, "body is empty"},
		{"not JSON", "application/json", "user_id=1", 400, "malformed JSON"},
		{"truncated", "application/json", `{"user_id": "` + user + `"`, 400, "ends too early"},
		{"array", "application/json", `[1, 2]`, 400, "must be a JSON object"},
		{"no user", "application/json", `{"data": 1}`, 400, `"user_id" is required`},
		{"bad user", "application/json", `{"user_id": "42", "data": 1}`, 400, `"user_id" must be a UUID`},
		{"user not a string", "application/json", `{"user_id": 42, "data": 1}`, 400, `"user_id" must be a string`},
		{"no data", "application/json", `{"user_id": "` + user + `"}`, 400, `"data" is required`},
		{"null data", "application/json", `{"user_id": "` + user + `", "data": null}`, 400, `"data" is required`},
		{"unknown field", "application/json", `{"user_id": "` + user + `", "data": 1, "admin": true}`, 400, `unknown field "admin"`},
		{"bad timestamp", "application/json", `{"user_id": "` + user + `", "data": 1, "timestamp": "yesterday"}`, 400, `"timestamp" must be RFC 3339`},
		{"future timestamp", "application/json", `{"user_id": "` + user + `", "data": 1, "timestamp": "2999-01-01T00:00:00Z"}`, 400, "out of range"},
		{"two objects", "application/json", `{"user_id": "` + user + `", "data": 1} {"x": 2}`, 400, "nothing after it"},
		{"data too big", "application/json", `{"user_id": "` + user + `", "data": "` + strings.Repeat("x", 9<<10) + `"}`, 400, "more than the 8192 allowed"},
		{"body too big", "application/json", big, 413, "more than 16384 bytes"},
		{"not JSON media type", "text/plain", `{"user_id": "` + user + `", "data": 1}`, 415, "send application/json"},
	}
	eachStore(t, func(t *testing.T, store string) {
		e := newEnv(t, store, nil)
		for _, c := range cases {
			code, b, _ := e.do("POST", "/activities", c.ctype, []byte(c.body))
			if code != c.code || !strings.Contains(string(b), c.reason) {
				t.Errorf("%s: %d %q, want %d with %q", c.name, code, b, c.code, c.reason)
			}
		}
		for _, q := range []struct{ query, reason string }{
			{"", "user_id must be a UUID"},
			{"user_id=nope", "user_id must be a UUID"},
			{"user_id=" + user + "&limit=0", "limit must be 1-100"},
			{"user_id=" + user + "&limit=1000", "limit must be 1-100"},
		} {
			code, b, _ := e.do("GET", "/activities?"+q.query, "", nil)
			if code != 400 || !strings.Contains(string(b), q.reason) {
				t.Errorf("GET /activities?%s: %d %q, want 400 with %q", q.query, code, b, q.reason)
			}
		}
		if got := e.history(user); len(got) != 0 {
			t.Errorf("invalid requests stored %d activities: %+v", len(got), got)
		}
	})
}

// TestDatabaseDown: with the database stopped, writes and reads fail
// with 503 within the timeout (plus a grace for a loaded machine), and
// /healthz says so; once the database is back the same service, without
// a restart, stores and reads again. Both the direct and the batching
// service are checked during one outage.
func TestDatabaseDown(t *testing.T) {
	eachStore(t, func(t *testing.T, store string) {
		envs, user, body := outageEnvs(t, store, "the outage")

		var node *deps.Cassandra
		switch store {
		case activities.Postgres:
			p := postgres(t)
			// The server's process lives as long as the context it is
			// started with: never a test's.
			t.Cleanup(func() { p.StartServer(context.Background()) })
			if err := p.StopServer(); err != nil {
				t.Fatal(err)
			}
		case activities.Cassandra:
			node = depstest.Cassandra(t)
			depstest.StopCassandra(t, node)
		}

		for name, e := range envs {
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/activities", body(1)},
				{"GET", "/handle", ""},
				{"GET", "/activities?user_id=" + user, ""},
			} {
				code, b, took := e.do(req.method, req.path, "application/json", []byte(req.body))
				refusedInTime(t, name+": "+req.method+" "+req.path, "the database down", code, b, took)
			}
			if code, b, _ := e.do("GET", "/healthz", "", nil); code != http.StatusServiceUnavailable {
				t.Errorf("%s: /healthz with the database down: %d %s, want 503", name, code, b)
			}
		}

		switch store {
		case activities.Postgres:
			if err := pg.StartServer(context.Background()); err != nil {
				t.Fatal(err)
			}
		case activities.Cassandra:
			depstest.StartCassandra(t, node)
		}

		writesResume(t, envs, body, "the database came back")
		for name, e := range envs {
			if code, b, _ := e.do("GET", "/healthz", "", nil); code != http.StatusOK {
				t.Errorf("%s: /healthz after the database came back: %d %s", name, code, b)
			}
		}
		// Both writes before the outage and one per service after it are
		// there (writes answered 503 may or may not be: they were not
		// acknowledged).
		hist := envs["batch=false"].history(user)
		seen := map[int]bool{}
		for _, a := range hist {
			var d struct{ N int }
			json.Unmarshal(a.Data, &d)
			seen[d.N] = true
		}
		if !seen[0] || len(hist) < 4 {
			t.Errorf("history after the outage: %d activities %v, want the 2 written before and 2 after it", len(hist), seen)
		}
	})
}

// TestDatabaseFrozen: a database that accepts connections but answers
// nothing (all its processes stopped with SIGSTOP, as a stalled disk or a
// long GC pause looks from outside) costs a request the timeout, then a
// 503, not a hang; once it thaws the service answers again.
func TestDatabaseFrozen(t *testing.T) {
	eachStore(t, func(t *testing.T, store string) {
		envs, _, body := outageEnvs(t, store, "the freeze")
		var pid int
		switch store {
		case activities.Postgres:
			pid = postgres(t).Proc().PID()
		case activities.Cassandra:
			pid = depstest.Cassandra(t).Proc().PID()
		}
		// The server and every process it forked: each Postgres backend
		// is a child of the postmaster, in a session of its own.
		procs := append(children(pid), pid)
		thaw := func() {
			for _, p := range procs {
				syscall.Kill(p, syscall.SIGCONT)
			}
		}
		t.Cleanup(thaw)
		for _, p := range procs {
			if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
				t.Fatalf("SIGSTOP %d: %v", p, err)
			}
		}
		for name, e := range envs {
			code, b, took := e.post(body(1))
			refusedInTime(t, name+": POST", "the database frozen", code, b, took)
		}
		thaw()
		writesResume(t, envs, body, "the database thawed")
	})
}

// The fault tests' services bound a request's database work by
// outageTimeout; a loaded machine may add up to outageGrace to it.
const (
	outageTimeout = 2 * time.Second
	outageGrace   = 3 * time.Second
)

// outageEnvs starts a direct and a batching service on store, each with
// outageTimeout, and has each store an activity of a new user (body(0))
// before the fault (what); it returns them by name, the user and the
// request body of its n-th activity.
func outageEnvs(t *testing.T, store, what string) (map[string]*env, string, func(n int) string) {
	t.Helper()
	envs := map[string]*env{}
	for _, batch := range []bool{false, true} {
		envs[fmt.Sprintf("batch=%v", batch)] = newEnv(t, store, func(c *activities.Config) { c.Batch = batch; c.Timeout = outageTimeout })
	}
	user := uuid.NewString()
	body := func(n int) string { return fmt.Sprintf(`{"user_id": %q, "data": {"n": %d}}`, user, n) }
	for name, e := range envs {
		if code, b, _ := e.post(body(0)); code != http.StatusCreated {
			t.Fatalf("%s: before %s: %d %s", name, what, code, b)
		}
	}
	return envs, user, body
}

// refusedInTime checks that a request (req) made during a fault (with
// what) was answered 503 within outageTimeout (+ outageGrace), and logs
// the answer.
func refusedInTime(t *testing.T, req, with string, code int, body []byte, took time.Duration) {
	t.Helper()
	if code != http.StatusServiceUnavailable {
		t.Errorf("%s with %s: %d %s, want 503", req, with, code, body)
	}
	if took > outageTimeout+outageGrace {
		t.Errorf("%s took %s with %s, want at most the %s timeout (+%s grace)", req, took, with, outageTimeout, outageGrace)
	}
	t.Logf("%s: %d in %s: %s", req, code, took.Round(time.Millisecond), strings.TrimSpace(string(body)))
}

// writesResume waits (a minute at most) until each of envs stores a
// write again after the fault ended (what).
func writesResume(t *testing.T, envs map[string]*env, body func(n int) string, what string) {
	t.Helper()
	n := 2
	for name, e := range envs {
		testkit.EventuallyNil(t, time.Minute, name+": a write after "+what, func() error {
			n++
			code, b, _ := e.post(body(n))
			if code != http.StatusCreated {
				return fmt.Errorf("%d %s", code, b)
			}
			return nil
		})
	}
}

// children returns the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	for child, st := range procfs.All() {
		if st.PPID == pid {
			out = append(out, child)
		}
	}
	return out
}

// TestSQLDefaultsPool: Postgres through database/sql with no limits set
// (the report's app, --pg-pool sql-defaults) stores and reads like the
// bounded pool, with and without --batch, also with more concurrent
// writers than the 2 idle connections it keeps.
func TestSQLDefaultsPool(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			e := newEnv(t, activities.Postgres, func(c *activities.Config) { c.PGPool = activities.PoolSQLDefaults; c.Batch = batch })
			user := uuid.NewString()
			const writers = 12
			errs := make(chan error, writers)
			for i := range writers {
				go func() {
					body := fmt.Sprintf(`{"user_id": %q, "data": {"n": %d}}`, user, i)
					resp, err := e.srv.Client().Post(e.srv.URL+"/activities", "application/json", strings.NewReader(body))
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							err = fmt.Errorf("POST: %s, want 201", resp.Status)
						}
					}
					errs <- err
				}()
			}
			for range writers {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if got := e.history(user); len(got) != writers {
				t.Fatalf("history has %d activities, want the %d acknowledged", len(got), writers)
			}
		})
	}
}
