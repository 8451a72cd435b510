package replicaexp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// histogram is a Prometheus histogram as scraped: cumulative counts by
// upper bound (the last is +Inf), with its sum and count.
type histogram struct {
	le         []float64
	cum        []float64
	sum, count float64
}

var scrapeClient = &http.Client{Timeout: 2 * time.Second}

// scrapeHistogram reads histogram name from a /metrics URL, its series
// summed.
func scrapeHistogram(ctx context.Context, url, name string) (histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return histogram{}, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return histogram{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return histogram{}, fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	return parseHistogram(io.LimitReader(resp.Body, 16<<20), name)
}

// parseHistogram sums the series of histogram name over their labels
// (but le): every table's replica_lag_seconds, for one.
func parseHistogram(r io.Reader, name string) (histogram, error) {
	var h histogram
	byLE := map[float64]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		metric, labels, value, ok := splitSample(line)
		if !ok {
			continue
		}
		switch metric {
		case name + "_bucket":
			leText, found := label(labels, "le")
			if !found {
				return h, fmt.Errorf("metrics line %q: a bucket without le", line)
			}
			le, err := strconv.ParseFloat(leText, 64)
			if err != nil {
				return h, fmt.Errorf("metrics line %q: %w", line, err)
			}
			byLE[le] += value
		case name + "_sum":
			h.sum += value
		case name + "_count":
			h.count += value
		}
	}
	if err := sc.Err(); err != nil {
		return h, err
	}
	for le := range byLE {
		h.le = append(h.le, le)
	}
	slices.Sort(h.le)
	for _, le := range h.le {
		h.cum = append(h.cum, byLE[le])
	}
	if len(h.le) < 2 || !math.IsInf(h.le[len(h.le)-1], 1) {
		return h, fmt.Errorf("no histogram %s in the metrics", name)
	}
	return h, nil
}

// splitSample splits a text-format sample line into name, label text and
// value; comments and malformed lines give ok false.
func splitSample(line string) (name, labels string, value float64, ok bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", "", 0, false
	}
	rest := line
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			return "", "", 0, false
		}
		labels, rest = rest[1:end], rest[end+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", "", 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return name, labels, v, err == nil
}

// label returns the value of label name in a label text (a="x",b="y");
// values holding quotes or commas are not expected here.
func label(labels, name string) (string, bool) {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && k == name {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
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
