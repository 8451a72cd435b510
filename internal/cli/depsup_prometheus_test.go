package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/testkit"
)

// prometheusCase is hlab deps up prometheus: it scrapes the four jobs of
// the shipped config with the alert rules loaded, and keeps its samples
// across down and up.
func prometheusCase() depsUpCase {
	var scraped time.Time // when a sample was taken, before down
	return depsUpCase{
		name:      "prometheus",
		available: func() error { _, _, err := deps.FindPrometheus(); return err },
		check:     checkPrometheus,
		keep: func(t *testing.T, ctx context.Context, conn string) {
			testkit.EventuallyNil(t, time.Minute, "a scrape of the tasks job", func() error {
				got, err := deps.QueryPrometheus(ctx, conn, `timestamp(up{job="tasks"})`)
				if err != nil || len(got) == 0 {
					return fmt.Errorf("%v, %d series", err, len(got))
				}
				sec, err := strconv.ParseFloat(got[0].Value, 64)
				scraped = time.UnixMilli(int64(sec * 1000))
				return err
			})
		},
		persisted: func(t *testing.T, ctx context.Context, conn string) {
			got, err := deps.QueryPrometheusAt(ctx, conn, `up{job="tasks"}`, scraped)
			if err != nil || len(got) != 1 {
				t.Errorf("the tasks job's sample at %s, taken before down: %v, %v; want it kept", scraped.Format(time.RFC3339Nano), got, err)
			}
		},
	}
}

// checkPrometheus: every job of the shipped config is scraped (up, 0 or
// 1: nothing need run there) and every rule file is loaded.
func checkPrometheus(t *testing.T, ctx context.Context, conn string) {
	t.Helper()
	testkit.EventuallyNil(t, time.Minute, "every job of the shipped config scraped", func() error {
		got, err := deps.QueryPrometheus(ctx, conn, "count by (job) (up)")
		if err != nil {
			return err
		}
		var jobs []string
		for _, s := range got {
			jobs = append(jobs, s.Metric["job"])
		}
		if slices.Sort(jobs); !slices.Equal(jobs, []string{"catalog", "databus", "pricing", "tasks"}) {
			return fmt.Errorf("jobs %q", jobs)
		}
		return nil
	})
	groups, err := deps.PrometheusRules(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"hlab-databus", "hlab-replica", "hlab-tasks"}) {
		t.Errorf("rule groups %q; want the shipped alert rules", names)
	}
}
