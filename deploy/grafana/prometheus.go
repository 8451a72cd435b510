package grafana

import (
	"embed"
	"io/fs"
)

// promFiles are the Prometheus side of the dashboards: the scrape config
// and the alert rules it loads (rule_files: alerts/*.rules.yml, relative
// to it). The rules' promtool tests (alerts/*.test.yml) stay out: they
// are for the tests, not for a server.
//
//go:embed prometheus.yml alerts/*.rules.yml
var promFiles embed.FS

// ScrapeConfig returns prometheus.yml: a job per service at its default
// address, and the alert rules.
func ScrapeConfig() []byte {
	b, err := promFiles.ReadFile("prometheus.yml")
	if err != nil {
		panic(err) // embedded: present in every build
	}
	return b
}

// AlertRules returns the alert rule files by their path relative to
// prometheus.yml ("alerts/tasks.rules.yml"), to write beside it.
func AlertRules() map[string][]byte {
	out := map[string][]byte{}
	paths, err := fs.Glob(promFiles, "alerts/*.rules.yml")
	if err != nil {
		panic(err) // a constant, valid pattern
	}
	for _, p := range paths {
		b, err := promFiles.ReadFile(p)
		if err != nil {
			panic(err)
		}
		out[p] = b
	}
	return out
}
