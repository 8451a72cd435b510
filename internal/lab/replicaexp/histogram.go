package replicaexp

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/promtext"
)

// histogram is promtext's, with what the freshness rows need of it: the
// observations between two scrapes, a quantile, the bucket resolution.
type histogram promtext.Histogram

// scrapeHistogram reads histogram name from a /metrics URL, its series
// summed.
func scrapeHistogram(ctx context.Context, url, name string) (histogram, error) {
	m, err := lab.ScrapeMetrics(ctx, url)
	if err != nil {
		return histogram{}, err
	}
	return histogramOf(m, name)
}

func histogramOf(m promtext.Metrics, name string) (histogram, error) {
	h, ok := m.Histogram(name)
	if !ok {
		return histogram(h), fmt.Errorf("no histogram %s in the metrics", name)
	}
	return histogram(h), nil
}

// bucketFactor is how much wider each bucket is than the last (the
// resolution of a percentile read from them); 0 if unknown.
func (h histogram) bucketFactor() float64 {
	if len(h.Bounds) < 3 || h.Bounds[0] <= 0 {
		return 0
	}
	return h.Bounds[1] / h.Bounds[0]
}

// sub is the histogram of the observations made between b and h.
func (h histogram) sub(b histogram) histogram {
	out := histogram{Bounds: h.Bounds, Cumulative: make([]float64, len(h.Cumulative)), Sum: h.Sum - b.Sum, Count: h.Count - b.Count}
	for i := range h.Cumulative {
		out.Cumulative[i] = h.Cumulative[i]
		if i < len(b.Cumulative) {
			out.Cumulative[i] -= b.Cumulative[i]
		}
	}
	return out
}

// quantileMS is the q-quantile (0-1) in milliseconds, interpolated
// linearly inside its bucket as Prometheus's histogram_quantile does; nil
// without observations. In the +Inf bucket it is the highest finite bound.
func (h histogram) quantileMS(q float64) *float64 {
	if len(h.Cumulative) == 0 || h.Cumulative[len(h.Cumulative)-1] <= 0 {
		return nil
	}
	rank := q * h.Cumulative[len(h.Cumulative)-1]
	i, _ := slices.BinarySearch(h.Cumulative, rank)
	for i < len(h.Cumulative)-1 && h.Cumulative[i] < rank {
		i++
	}
	if math.IsInf(h.Bounds[i], 1) {
		v := h.Bounds[max(0, i-1)] * 1000
		return &v
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.Bounds[i-1], h.Cumulative[i-1]
	}
	frac := 1.0
	if in := h.Cumulative[i] - below; in > 0 {
		frac = (rank - below) / in
	}
	v := (lower + (h.Bounds[i]-lower)*frac) * 1000
	return &v
}
