package promtext_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/promtext"
)

func TestParse(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_alloc_bytes 1.048576e+06
http_requests_total{code="200",path="GET /"} 10
http_requests_total{path="GET /",code="504"} 5
odd_total{label="with } and \" inside"} 2 1700000000000
# TYPE lat_seconds histogram
lat_seconds_bucket{le="1"} 2
lat_seconds_bucket{le="+Inf"} 3
lat_seconds_sum 1.5
lat_seconds_count 3
`
	got, err := promtext.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"go_goroutines": 42, "go_memstats_heap_alloc_bytes": 1 << 20, "http_requests_total": 15, "odd_total": 2,
		"lat_seconds_sum": 1.5, "lat_seconds_count": 3}
	for k, v := range want {
		if g := got.Sum(k, nil); g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	// Labels pick series, in whatever order they are written.
	if g := got.Sum("http_requests_total", map[string]string{"code": "504"}); g != 5 {
		t.Errorf("code 504: %v, want 5", g)
	}
	if g := got.Sum("http_requests_total", map[string]string{"path": "GET /", "code": "200"}); g != 10 {
		t.Errorf("code 200: %v, want 10", g)
	}
	for _, bad := range []string{"x{a=\"1\" 3\n", "x\n", "x abc\n"} {
		if _, err := promtext.Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestHistogramSumsSeries(t *testing.T) {
	text := `# TYPE lag_seconds histogram
lag_seconds_bucket{table="a",le="0.001"} 4
lag_seconds_bucket{table="a",le="+Inf"} 5
lag_seconds_sum{table="a"} 0.1
lag_seconds_count{table="a"} 5
lag_seconds_bucket{le="0.001",table="b"} 6
lag_seconds_bucket{le="+Inf",table="b"} 6
lag_seconds_sum{table="b"} 0.2
lag_seconds_count{table="b"} 6
`
	m, err := promtext.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	h, ok := m.Histogram("lag_seconds")
	if !ok || !slices.Equal(h.Bounds, []float64{0.001, math.Inf(1)}) || !slices.Equal(h.Cumulative, []float64{10, 11}) ||
		h.Count != 11 || math.Abs(h.Sum-0.3) > 1e-9 {
		t.Errorf("Histogram = %+v, %v", h, ok)
	}
	if _, ok := m.Histogram("other"); ok {
		t.Error("a missing histogram was found")
	}
	if !m.Has("lag_seconds_count") || m.Has("other") {
		t.Error("Has is wrong")
	}
}
