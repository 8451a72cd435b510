package testkit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/highload-lab/hlab/internal/promtext"
)

// MetricSum sums the values of the series of the counter or gauge name in
// g whose labels include every pair of labels (every series when labels
// is empty); 0 when there is none. It fails t when g cannot gather. It
// sums as promtext.Metrics.Sum does, so tests and the lab read a metric
// one way.
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
	if mf == nil {
		return 0
	}
	return promtext.Metrics{mf.GetName(): mf}.Sum(mf.GetName(), labels)
}

// client is the tests' HTTP client: it gives up on a server that does
// not answer within 30 s.
var client = &http.Client{Timeout: 30 * time.Second}

// Scrape reads the metrics a server exposes at url in Prometheus's text
// format, by name; it fails t when they cannot be read or parsed.
func Scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	m, err := promtext.Scrape(context.Background(), client, url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
