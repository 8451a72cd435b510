// Package promtext reads Prometheus text expositions (a service's
// /metrics) with prometheus/common's parser, the one the ecosystem
// trusts, so that the lab and the checker read metrics one way: by name
// and labels, never by matching the start of a line, which breaks when
// label order or spacing changes.
//
// It sits below both the lab and the checker (the lab imports the
// checker, so the parser cannot live in the lab).
package promtext

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MaxBytes bounds what Scrape reads of an exposition.
const MaxBytes = 16 << 20

// Metrics are one scrape of a text exposition, by metric family name.
type Metrics map[string]*dto.MetricFamily

// Parse parses a text exposition.
func Parse(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return Metrics(fams), nil
}

// Scrape reads and parses the exposition at url with client. Its errors
// name the URL ("scrape URL: ..."); callers wrap them with their package's
// name.
func Scrape(ctx context.Context, client *http.Client, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	m, err := Parse(io.LimitReader(resp.Body, MaxBytes))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
}

// Has reports whether the exposition has metric name (a histogram's or
// summary's name_sum and name_count count as its own).
func (m Metrics) Has(name string) bool {
	fam, _ := m.family(name)
	return fam != nil
}

// Sum returns the sum of the series of metric name whose labels include
// labels (every series when labels is empty); 0 when there is none. A
// histogram's or a summary's _sum and _count are metrics of their own
// here, as the text format names them.
func (m Metrics) Sum(name string, labels map[string]string) float64 {
	fam, suffix := m.family(name)
	if fam == nil {
		return 0
	}
	var total float64
	for _, metric := range fam.GetMetric() {
		if hasLabels(metric, labels) {
			total += value(metric, suffix)
		}
	}
	return total
}

// family finds name's family: name itself, or a histogram's or summary's
// whose _sum or _count name is.
func (m Metrics) family(name string) (*dto.MetricFamily, string) {
	if fam := m[name]; fam != nil {
		return fam, ""
	}
	for _, sfx := range []string{"_sum", "_count"} {
		if base, ok := cutSuffix(name, sfx); ok && m[base] != nil {
			return m[base], sfx
		}
	}
	return nil, ""
}

// Histogram is a histogram's series summed: cumulative counts by upper
// bound, ascending (the last is +Inf), with its sum and count.
type Histogram struct {
	Bounds     []float64
	Cumulative []float64
	Sum, Count float64
}

// Histogram sums the series of histogram name over their labels: every
// table's replica_lag_seconds, for one. ok is false when name is not a
// histogram with at least one finite bucket.
func (m Metrics) Histogram(name string) (h Histogram, ok bool) {
	fam := m[name]
	if fam == nil || fam.GetType() != dto.MetricType_HISTOGRAM {
		return h, false
	}
	byLE := map[float64]float64{}
	for _, metric := range fam.GetMetric() {
		hist := metric.GetHistogram()
		inf := false
		for _, b := range hist.GetBucket() {
			byLE[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			inf = inf || math.IsInf(b.GetUpperBound(), 1)
		}
		if !inf { // the +Inf bucket is the count
			byLE[math.Inf(1)] += float64(hist.GetSampleCount())
		}
		h.Sum += hist.GetSampleSum()
		h.Count += float64(hist.GetSampleCount())
	}
	for le := range byLE {
		h.Bounds = append(h.Bounds, le)
	}
	slices.Sort(h.Bounds)
	for _, le := range h.Bounds {
		h.Cumulative = append(h.Cumulative, byLE[le])
	}
	return h, len(h.Bounds) >= 2
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

func hasLabels(metric *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range metric.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// value is a series' value: the counter, gauge or untyped value, or a
// histogram's or summary's _sum or _count.
func value(m *dto.Metric, suffix string) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	case m.Histogram != nil && suffix == "_sum":
		return m.GetHistogram().GetSampleSum()
	case m.Histogram != nil && suffix == "_count":
		return float64(m.GetHistogram().GetSampleCount())
	case m.Summary != nil && suffix == "_sum":
		return m.GetSummary().GetSampleSum()
	case m.Summary != nil && suffix == "_count":
		return float64(m.GetSummary().GetSampleCount())
	}
	return 0
}
