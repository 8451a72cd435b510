package tasks_test

import (
	"fmt"
	"testing"
)

// BenchmarkRoutes measures the service's own cost per request on a real
// Postgres, one request at a time, through the HTTP stack.
func BenchmarkRoutes(b *testing.B) {
	e := newEnv(b, nil)
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
		b.Run("route="+tc.name, func(b *testing.B) {
			for b.Loop() {
				if a := c.do(tc.method, tc.path, tc.body); a.code >= 300 {
					b.Fatal(a)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
