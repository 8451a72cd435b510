package tasks_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/highload-lab/hlab/internal/services/tasks"
)

// BenchmarkRoutes measures the service's own cost per request on a real
// Postgres, one request at a time, through the HTTP stack: with the
// report's process-local events, and with the event log (--events
// postgres), which adds a statement to every write.
func BenchmarkRoutes(b *testing.B) {
	for _, events := range []string{tasks.EventsLocal, tasks.EventsPostgres} {
		e := newEnv(b, func(c *tasks.Config) { c.Events = events })
		c := e.signup("bench@example.com")
		task := c.createTask(map[string]any{"title": "bench"})
		get := fmt.Sprintf("/v1/tasks/%d", task.ID)
		for _, tc := range []struct {
			name   string
			method string
			path   string
			body   any
		}{
			{"get", "GET", get, nil},
			{"list", "GET", "/v1/tasks?limit=20", nil},
			{"update", "PATCH", get, map[string]any{"priority": 1}},
			{"create", "POST", "/v1/tasks", map[string]any{"title": "bench"}},
		} {
			b.Run("events="+events+"/route="+tc.name, func(b *testing.B) {
				for b.Loop() {
					if a := c.do(tc.method, tc.path, tc.body); a.code >= 300 {
						b.Fatal(a)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			})
		}
	}
}

// BenchmarkNotifyWrite measures what --notify-outbox costs a task write:
// the create of a user with a device and a webhook, its notification
// queued in memory after commit, or written to the outbox in the
// create's transaction (and delivered by the workers meanwhile).
func BenchmarkNotifyWrite(b *testing.B) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(hook.Close)
	for _, outbox := range []bool{false, true} {
		b.Run(fmt.Sprintf("outbox=%v", outbox), func(b *testing.B) {
			e := newEnv(b, func(c *tasks.Config) {
				c.WebhookURL = hook.URL
				c.NotifyOutbox = outbox
			})
			c := e.signup("bench@example.com")
			c.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "w"})
			for b.Loop() {
				if a := c.do("POST", "/v1/tasks", map[string]any{"title": "bench"}); a.code != http.StatusCreated {
					b.Fatal(a)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// BenchmarkLoginLimits measures what --login-limits postgres costs a
// login (a wrong password, the cheapest bcrypt): two upserts, the
// address's bucket and the account's, instead of two map lookups.
func BenchmarkLoginLimits(b *testing.B) {
	for _, limits := range []string{tasks.LimitsProcess, tasks.LimitsPostgres} {
		b.Run("limits="+limits, func(b *testing.B) {
			e := newEnv(b, func(c *tasks.Config) {
				c.LoginLimits = limits
				c.LoginIPBurst, c.LoginAccountBurst = 1<<30, 1<<30
			})
			e.signup("bench@example.com")
			anon := e.anon()
			for b.Loop() {
				if a := anon.do("POST", "/v1/auth/login", map[string]string{"email": "bench@example.com", "password": "wrong"}); a.code != http.StatusUnauthorized {
					b.Fatal(a)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
