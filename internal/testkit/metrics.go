package testkit

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricSum sums the values of the series of the counter or gauge name in
// g whose labels include every pair of labels (every series when labels
// is empty); 0 when there is none. It fails t when g cannot gather.
func MetricSum(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	return SumFamily(Family(t, g, name), labels)
}

// Family returns the metric family name gathered from g, of any type (a
// histogram's counts included); nil when there is none. It fails t when g
// cannot gather.
func Family(t testing.TB, g prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// SumFamily sums the values of mf's counter, gauge or untyped series whose labels
// include every pair of labels (every series when labels is empty); 0
// when mf is nil.
func SumFamily(mf *dto.MetricFamily, labels map[string]string) float64 {
	sum := 0.0
	for _, m := range mf.GetMetric() {
		if hasLabels(m, labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return sum
}

// hasLabels reports whether m carries every pair of labels.
func hasLabels(m *dto.Metric, labels map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(labels)
}

// client is the tests' HTTP client: it gives up on a server that does
// not answer within 30 s.
var client = &http.Client{Timeout: 30 * time.Second}

// Scrape reads the metrics a server exposes at url in Prometheus's text
// format, by name; it fails t when they cannot be read or parsed.
func Scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return mfs
}
