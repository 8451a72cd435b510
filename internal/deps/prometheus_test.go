package deps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/testkit"
)

// TestPrometheus starts a real Prometheus with a config that scrapes a
// test server every second and a rule file, reads the scraped value and
// the alert back through the HTTP API, and stops it; a config it refuses
// is an error that quotes its log, not a wait until the timeout.
func TestPrometheus(t *testing.T) {
	if _, _, err := FindPrometheus(); errors.Is(err, ErrPrometheusNotInstalled) {
		testkit.SkipMissing(t, "prometheus", err)
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# TYPE hlab_test_total counter\nhlab_test_total 3\n")
	}))
	defer target.Close()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules/test.yml]
scrape_configs:
  - job_name: target
    static_configs:
      - targets: [%q]
`, strings.TrimPrefix(target.URL, "http://"))
	rules := `groups:
  - name: test
    rules:
      - alert: HlabTestHigh
        expr: hlab_test_total > 1
        labels: {severity: page}
`
	sb := testSandbox(t)
	ctx := context.Background()
	start := time.Now()
	p, err := StartPrometheus(ctx, sb, PrometheusConfig{Config: []byte(cfg), Files: map[string][]byte{"rules/test.yml": []byte(rules)}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	t.Logf("started %s at %s in %s", p.Kind, p.URL, time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(p.Kind, "prometheus ") || p.Version == "" {
		t.Errorf("Kind %q, Version %q", p.Kind, p.Version)
	}
	testkit.EventuallyNil(t, 30*time.Second, "the scraped value", func() error {
		got, err := p.Query(ctx, `hlab_test_total{job="target"}`)
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].Value != "3" {
			return fmt.Errorf("got %+v; want one series of value 3", got)
		}
		return nil
	})
	testkit.EventuallyNil(t, 30*time.Second, "the alert firing", func() error {
		groups, err := PrometheusRules(ctx, p.URL)
		if err != nil {
			return err
		}
		if len(groups) != 1 || len(groups[0].Rules) != 1 {
			return fmt.Errorf("rule groups %+v; want the one rule", groups)
		}
		if r := groups[0].Rules[0]; r.Health != "ok" || r.State != "firing" {
			return fmt.Errorf("rule %+v; want healthy and firing", r)
		}
		return nil
	})
	if _, err := p.Query(ctx, "rate(hlab_test_total"); err == nil || !strings.Contains(err.Error(), "bad_data") {
		t.Errorf("a query that does not parse: %v; want Prometheus' bad_data error", err)
	}
	dir := p.Dir
	mustStop(t, "prometheus", p.Proc(), p.Stop)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop left the temporary directory %s: %v", dir, err)
	}

	// A kept directory's rule file that the config no longer has is not
	// loaded (the rule_files glob would match it).
	kept := t.TempDir()
	if err := os.MkdirAll(filepath.Join(kept, "rules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kept, "rules", "old.yml"), []byte("groups: [{name: old, rules: [{alert: Old, expr: vector(1)}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = strings.Replace(cfg, "rule_files: [rules/test.yml]", "rule_files: [rules/*.yml]", 1)
	p, err = StartPrometheus(ctx, sb, PrometheusConfig{Config: []byte(cfg), Files: map[string][]byte{"rules/test.yml": []byte(rules)}, Dir: kept, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := PrometheusRules(ctx, p.URL)
	if err != nil || len(groups) != 1 || groups[0].Name != "test" {
		t.Errorf("rule groups in a kept directory: %+v, %v; want only the config's, test", groups, err)
	}
	mustStop(t, "prometheus", p.Proc(), p.Stop)

	_, err = StartPrometheus(ctx, sb, PrometheusConfig{Config: []byte("scrape_configs: [{job_name: x, scrape_interval: banana}]\n")})
	if err == nil || !strings.Contains(err.Error(), "banana") {
		t.Errorf("a bad config: %v; want an error quoting Prometheus' complaint", err)
	}
	for _, name := range []string{"../escape.yml", "data/wal/x"} {
		_, err = StartPrometheus(ctx, sb, PrometheusConfig{Config: []byte(cfg), Files: map[string][]byte{name: nil}})
		if err == nil || !strings.Contains(err.Error(), "relative path inside") {
			t.Errorf("a file at %s: %v; want refused", name, err)
		}
	}
}
