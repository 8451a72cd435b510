package grafana_test

import (
	"testing"
	"time"

	"github.com/highload-lab/hlab/deploy/grafana"
)

// TestExpand: Grafana's variables as Grafana fills them, $__rate_interval
// by its documented rule, and no variable left in place unknown.
func TestExpand(t *testing.T) {
	vars := map[string]string{"job": "tasks", "instance": ".+"}
	for _, tc := range []struct {
		expr           string
		scrape, window time.Duration
		want           string
	}{
		{`rate(x{job=~"$job", instance=~"$instance"}[$__rate_interval])`, time.Second, 0, `rate(x{job=~"tasks", instance=~".+"}[4s])`},
		{`rate(x{job=~"${job}"}[$__rate_interval])`, 0, 0, `rate(x{job=~"tasks"}[60s])`}, // Grafana's default scrape interval, 15s
		{`rate(x{job=~"[[job]]"}[$__rate_interval])`, 15 * time.Second, time.Minute, `rate(x{job=~"tasks"}[75s])`},
		{`increase(x[$__interval]) / $__interval_ms`, 15 * time.Second, 1500 * time.Millisecond, `increase(x[15s]) / 15000`},
		{`rate(x[$__rate_interval])`, 500 * time.Millisecond, 0, `rate(x[2s])`},
	} {
		got, err := grafana.Expand(tc.expr, grafana.Interpolation{Vars: vars, ScrapeInterval: tc.scrape, Interval: tc.window})
		if err != nil || got != tc.want {
			t.Errorf("Expand(%s, scrape %s, interval %s) = %q, %v; want %q", tc.expr, tc.scrape, tc.window, got, err, tc.want)
		}
	}
	for _, bad := range []string{`x{job=~"$jobs"}`, `x{job=~"${job:csv}"}`, `x[$__range]`} {
		if got, err := grafana.Expand(bad, grafana.Interpolation{Vars: vars}); err == nil {
			t.Errorf("Expand(%s) = %q; want an error", bad, got)
		}
	}
}
