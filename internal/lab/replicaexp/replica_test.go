package replicaexp

import (
	"io"
	"math"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/promtext"
)

func TestSpec(t *testing.T) {
	labtest.SpecValid(t, New())
	for _, c := range catalogConns {
		if catalogRef[c] == 0 {
			t.Errorf("no report figure for %d connections", c)
		}
	}
}

// TestMeanRefAtProductionLoad: the report's 120 µs mean stands beside
// the row at its production load only, where production saw it, and
// beside none of the saturated catalog rows.
func TestMeanRefAtProductionLoad(t *testing.T) {
	for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
		for _, r := range New().Spec(lab.Options{Mode: mode}).Rows {
			mean := r.Ref != nil && r.Ref.MeanMS != nil && *r.Ref.MeanMS == reportMeanMS
			if mean != (r.Key == catalogProdKey) {
				t.Errorf("%s mode, row %q: the report's 120 µs beside it: %v", mode, r.Key, mean)
			}
		}
	}
}

// TestAverageRow: the report's way of averaging (its rows from 4 VUs up,
// each alike) applied to ours, rows missing or unmeasured left out.
func TestAverageRow(t *testing.T) {
	rows := func(rps map[int]float64) map[int]*labresult.Row {
		out := map[int]*labresult.Row{}
		for c, v := range rps {
			out[c] = &labresult.Row{RPS: labresult.F(v)}
		}
		return out
	}
	tests := []struct {
		name string
		rows map[int]*labresult.Row
		want float64 // 0: not measured
		runs int
	}{
		{"the report's own table", rows(catalogRef), 35540.4, 5},
		{"rows below 4 left out", rows(map[int]float64{1: 1, 3: 1, 4: 100, 200: 300}), 200, 2},
		{"none from 4 up", rows(map[int]float64{1: 10, 2: 20}), 0, 0},
		{"an unmeasured row left out", map[int]*labresult.Row{4: {}, 5: {RPS: labresult.F(50)}}, 50, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := averageRow(tt.rows)
			if row.Key != catalogAvgKey || row.Runs != tt.runs {
				t.Fatalf("key %q, runs %d, want %q, %d", row.Key, row.Runs, catalogAvgKey, tt.runs)
			}
			if tt.want == 0 {
				if row.RPS != nil {
					t.Fatalf("rps %v, want not measured", *row.RPS)
				}
				return
			}
			if row.RPS == nil || math.Abs(*row.RPS-tt.want) > 0.05 {
				t.Fatalf("rps %v, want %v", row.RPS, tt.want)
			}
		})
	}
}

const sample = `# HELP replica_lag_seconds x
# TYPE replica_lag_seconds histogram
replica_lag_seconds_bucket{table="a",le="0.001"} 4
replica_lag_seconds_bucket{table="a",le="0.002"} 30
replica_lag_seconds_bucket{table="a",le="0.004"} 50
replica_lag_seconds_bucket{table="a",le="+Inf"} 50
replica_lag_seconds_sum{table="a"} 0.1
replica_lag_seconds_count{table="a"} 50
replica_lag_seconds_bucket{table="b",le="0.001"} 6
replica_lag_seconds_bucket{table="b",le="0.002"} 30
replica_lag_seconds_bucket{table="b",le="0.004"} 50
replica_lag_seconds_bucket{table="b",le="+Inf"} 50
replica_lag_seconds_sum{table="b"} 0.1
replica_lag_seconds_count{table="b"} 50
replica_lag_seconds_other 7
other_metric 5
`

func TestHistogramQuantiles(t *testing.T) {
	h, err := parseHistogram(strings.NewReader(sample), "replica_lag_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if h.Count != 100 || h.Sum != 0.2 || h.bucketFactor() != 2 {
		t.Fatalf("parsed count %v, sum %v, factor %v", h.Count, h.Sum, h.bucketFactor())
	}
	tests := []struct{ q, wantMS float64 }{
		{0.05, 0.5}, // half of the first bucket, from 0
		{0.5, 1.8},  // 40 of the 50 in (1, 2] ms
		{0.99, 3.95},
	}
	for _, tt := range tests {
		got := h.quantileMS(tt.q)
		if got == nil || math.Abs(*got-tt.wantMS) > 1e-9 {
			t.Errorf("quantile %v = %v ms, want %v", tt.q, got, tt.wantMS)
		}
	}
	// The difference of two scrapes is the window's histogram.
	later := h
	later.Cumulative = []float64{10, 60, 150, 160}
	later.Count, later.Sum = 160, 0.5
	d := later.sub(h)
	if d.Count != 60 || math.Abs(d.Sum-0.3) > 1e-9 {
		t.Fatalf("sub: count %v sum %v", d.Count, d.Sum)
	}
	if got := d.quantileMS(0.5); got == nil || math.Abs(*got-(2+2*30.0/50)) > 1e-9 {
		t.Errorf("window median = %v ms", got)
	}
	// Past the last finite bound, the bound is all we know.
	if got := d.quantileMS(0.99); got == nil || *got != 4 {
		t.Errorf("window p99 = %v ms, want the last finite bound 4", got)
	}
	var empty histogram
	if empty.quantileMS(0.5) != nil {
		t.Error("an empty histogram has a median")
	}
	if _, err := parseHistogram(strings.NewReader("other 1\n"), "replica_lag_seconds"); err == nil {
		t.Error("no error for a missing histogram")
	}
}

func TestCoresAveragedOverRuns(t *testing.T) {
	c := cores{postgres: 0.9 + 0.3, loadgen: 0.4, machine: 3, runs: 2}
	row := &labresult.Row{}
	c.set(row)
	if math.Abs(row.Value(postgresCores)-0.6) > 1e-9 || row.Value(loadgenCores) != 0.2 || row.Value(machineCores) != 1.5 {
		t.Errorf("figures %v: want each averaged over the runs", row.Figures)
	}
}

// parseHistogram sums the series of histogram name in Prometheus text.
func parseHistogram(r io.Reader, name string) (histogram, error) {
	m, err := promtext.Parse(r)
	if err != nil {
		return histogram{}, err
	}
	return histogramOf(m, name)
}
