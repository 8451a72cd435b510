package depstest

import (
	"context"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/testkit"
)

// Prometheus starts a Prometheus server from cfg for t alone, in the test
// binary's sandbox (Run must be the package's TestMain), and stops it
// when t ends. It skips t when Prometheus is not installed, or fails it
// when HLAB_REQUIRE_DEPS is set.
func Prometheus(t testing.TB, cfg deps.PrometheusConfig) *deps.Prometheus {
	t.Helper()
	if _, _, err := deps.FindPrometheus(); err != nil {
		testkit.SkipMissing(t, "depstest: "+"prometheus", err)
	}
	box := Sandbox(t)
	start := time.Now()
	p, err := deps.StartPrometheus(context.Background(), box, cfg)
	if err != nil {
		t.Fatalf("depstest: start prometheus: %v", err)
	}
	t.Cleanup(func() { p.Stop() })
	t.Logf("depstest: started %s at %s in %s", p.Kind, p.URL, time.Since(start).Round(time.Millisecond))
	return p
}

// Promtool returns the path of promtool (Prometheus' checker of rules).
// It skips t when it is not installed, or fails it when
// HLAB_REQUIRE_DEPS is set.
func Promtool(t testing.TB) string {
	t.Helper()
	path, version, err := deps.FindPromtool()
	if err != nil {
		testkit.SkipMissing(t, "depstest: "+"promtool", err)
	}
	t.Logf("depstest: promtool %s", version)
	return path
}
