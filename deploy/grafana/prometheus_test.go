package grafana_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/deploy/grafana"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// scrapeInterval is the test Prometheus' scrape and rule evaluation
// interval, and what its data source would say to Grafana: short, so
// that rate windows fill within seconds.
const scrapeInterval = time.Second

// dashboardQuery is one dashboard query as Grafana would send it for one
// service.
type dashboardQuery struct {
	dashboard, service string
	expr               string // expanded
	series             int    // how many the last evaluation returned
}

// evaluateThroughPrometheus starts a real Prometheus that scrapes the
// services at bases (by job name: their service's name, as the
// dashboards' job variables and the alert rules select) every second,
// with the alert rules loaded, then evaluates every query of every
// dashboard through its HTTP API, with the variables as Grafana fills
// them (job: the service; instance: All), and requires each to return at
// least one series: a query that names the right metrics but returns
// nothing (a label that does not exist, a ratio of missing series)
// shows "No data" in Grafana. It also requires every alert rule to have
// evaluated without error.
func evaluateThroughPrometheus(t *testing.T, dashboards map[string]*grafana.Dashboard, bases map[string]string) {
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: %[1]s\n  scrape_timeout: %[1]s\n  evaluation_interval: %[1]s\n", scrapeInterval)
	cfg.WriteString("rule_files: [alerts/*.rules.yml]\nscrape_configs:\n")
	for _, svc := range slices.Sorted(maps.Keys(bases)) {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", svc, strings.TrimPrefix(bases[svc], "http://"))
	}
	p := depstest.Prometheus(t, deps.PrometheusConfig{Config: []byte(cfg.String()), Files: grafana.AlertRules()})
	ctx := context.Background()

	queries := expandQueries(t, dashboards)
	// Every target scraped three times: a rate window of four scrape
	// intervals holds two samples. Most of the wait is Prometheus' own:
	// it hands new targets to its scrapers at most every 5 s.
	testkit.EventuallyNil(t, time.Minute, "every target scraped 3 times", func() error {
		got, err := p.Query(ctx, "count_over_time(up[1m]) >= 3 and on (job, instance) (up == 1)")
		if err != nil || len(got) == len(bases) {
			return err
		}
		return fmt.Errorf("%d of %d targets", len(got), len(bases))
	})
	start := time.Now()
	var (
		last    time.Time
		lastErr error
	)
	testkit.EventuallyNil(t, time.Minute, "every dashboard query returns a series", func() error {
		if time.Since(last) < 500*time.Millisecond {
			return lastErr // a pause between rounds of queries, not a hammering
		}
		last = time.Now()
		lastErr = evaluate(ctx, p, queries)
		return lastErr
	})
	var list strings.Builder
	for _, q := range queries {
		fmt.Fprintf(&list, "\n%4d series  %s (%s): %s", q.series, q.dashboard, q.service, q.expr)
	}
	t.Logf("%d dashboard queries evaluated through %s, each with series %s after the targets' third scrape:%s",
		len(queries), p.Kind, time.Since(start).Round(100*time.Millisecond), list.String())

	testkit.EventuallyNil(t, time.Minute, "every alert rule evaluated without error", func() error {
		groups, err := deps.PrometheusRules(ctx, p.URL)
		if err != nil {
			return err
		}
		n := 0
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return fmt.Errorf("%s in %s: health %q %s", r.Name, g.File, r.Health, r.LastError)
				}
				n++
			}
		}
		if n == 0 {
			return fmt.Errorf("no rules loaded")
		}
		t.Logf("%d alert rules in %d groups evaluated without error", n, len(groups))
		return nil
	})
}

// expandQueries returns every query of every dashboard for every service
// it shows, its variables expanded as Grafana would.
func expandQueries(t *testing.T, dashboards map[string]*grafana.Dashboard) []dashboardQuery {
	var out []dashboardQuery
	for _, name := range slices.Sorted(maps.Keys(dashboards)) {
		d := dashboards[name]
		all, ok := d.AllValue("instance")
		if !ok {
			t.Fatalf("%s: the instance variable has no allValue for All", name)
		}
		for _, svc := range servedBy[name] {
			in := grafana.Interpolation{Vars: map[string]string{"job": svc, "instance": all}, ScrapeInterval: scrapeInterval}
			for _, e := range d.Exprs() {
				expr, err := grafana.Expand(e, in)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				out = append(out, dashboardQuery{dashboard: name, service: svc, expr: expr})
			}
		}
	}
	return out
}

// evaluate evaluates the queries that returned no series yet, and
// returns an error listing those that still return none.
func evaluate(ctx context.Context, p *deps.Prometheus, queries []dashboardQuery) error {
	var empty []string
	for i := range queries {
		q := &queries[i]
		if q.series > 0 {
			continue
		}
		got, err := p.Query(ctx, q.expr)
		if err != nil {
			return err
		}
		if q.series = len(got); q.series == 0 {
			empty = append(empty, q.dashboard+" ("+q.service+"): "+q.expr)
		}
	}
	if len(empty) > 0 {
		return fmt.Errorf("%d queries return no series:\n  %s", len(empty), strings.Join(empty, "\n  "))
	}
	return nil
}
