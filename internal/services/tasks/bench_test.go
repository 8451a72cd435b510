package tasks_test

import (
	"fmt"
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
