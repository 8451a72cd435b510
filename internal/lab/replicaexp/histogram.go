package replicaexp

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/promtext"
)

// histogram is a Prometheus histogram as scraped: cumulative counts by
// upper bound (the last is +Inf), with its sum and count.
type histogram struct {
	le         []float64
	cum        []float64
	sum, count float64
}

// scrapeHistogram reads histogram name from a /metrics URL, its series
// summed.
func scrapeHistogram(ctx context.Context, url, name string) (histogram, error) {
	m, err := lab.ScrapeMetrics(ctx, url)
	if err != nil {
		return histogram{}, err
	}
	return histogramOf(m, name)
}

// parseHistogram sums the series of histogram name over their labels
// (but le): every table's replica_lag_seconds, for one.
func parseHistogram(r io.Reader, name string) (histogram, error) {
	m, err := promtext.Parse(r)
	if err != nil {
		return histogram{}, err
	}
	return histogramOf(m, name)
}

func histogramOf(m promtext.Metrics, name string) (histogram, error) {
	ph, ok := m.Histogram(name)
	h := histogram{le: ph.Bounds, cum: ph.Cumulative, sum: ph.Sum, count: ph.Count}
	if !ok || !math.IsInf(h.le[len(h.le)-1], 1) {
		return h, fmt.Errorf("no histogram %s in the metrics", name)
	}
	return h, nil
}

// bucketFactor is how much wider each bucket is than the last (the
// resolution of a percentile read from them); 0 if unknown.
func (h histogram) bucketFactor() float64 {
	if len(h.le) < 3 || h.le[0] <= 0 {
		return 0
	}
	return h.le[1] / h.le[0]
}

// sub is the histogram of the observations made between b and h.
func (h histogram) sub(b histogram) histogram {
	out := histogram{le: h.le, cum: make([]float64, len(h.cum)), sum: h.sum - b.sum, count: h.count - b.count}
	for i := range h.cum {
		out.cum[i] = h.cum[i]
		if i < len(b.cum) {
			out.cum[i] -= b.cum[i]
		}
	}
	return out
}

// quantileMS is the q-quantile (0-1) in milliseconds, interpolated
// linearly inside its bucket as Prometheus's histogram_quantile does; nil
// without observations. In the +Inf bucket it is the highest finite bound.
func (h histogram) quantileMS(q float64) *float64 {
	if len(h.cum) == 0 || h.cum[len(h.cum)-1] <= 0 {
		return nil
	}
	rank := q * h.cum[len(h.cum)-1]
	i, _ := slices.BinarySearch(h.cum, rank)
	for i < len(h.cum)-1 && h.cum[i] < rank {
		i++
	}
	if math.IsInf(h.le[i], 1) {
		v := h.le[max(0, i-1)] * 1000
		return &v
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.le[i-1], h.cum[i-1]
	}
	frac := 1.0
	if in := h.cum[i] - below; in > 0 {
		frac = (rank - below) / in
	}
	v := (lower + (h.le[i]-lower)*frac) * 1000
	return &v
}
