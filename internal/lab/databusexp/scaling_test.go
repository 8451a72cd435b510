package databusexp

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// TestScalingRatios checks that the metrics' cost and the GOMAXPROCS
// ratio are shown per round (runs paired by round, not position), per
// gateway CPU-second where they say so, and not at all without the CPU.
func TestScalingRatios(t *testing.T) {
	run := func(round int, rps, cpu float64) labresult.RunValues {
		v := map[string]float64{labresult.RPS.Name: rps}
		if cpu > 0 {
			v[labresult.CPUAvg.Name] = cpu
		}
		return labresult.RunValues{Round: round, Values: v}
	}
	on := &labresult.Row{Key: echoBase, PerRun: []labresult.RunValues{run(1, 80000, 1), run(2, 70000, 1)}}
	off := &labresult.Row{Key: echoNoMetrics, PerRun: []labresult.RunValues{run(2, 70000, 0.875), run(1, 100000, 1)}}
	two := &labresult.Row{Key: echoTwoProcs, PerRun: []labresult.RunValues{run(1, 120000, 1.8), run(2, 154000, 1.9)}}
	rows := []*labresult.Row{on, off, two}
	for key, want := range map[labresult.Key]float64{
		// Per CPU-second: round 1 80,000 against 100,000, round 2 70,000
		// against 80,000: 0.8 and 0.875.
		"echo-metrics-on-over-off-per-cpu": math.Sqrt(0.8 * 0.875),
		"echo-metrics-on-over-off":         math.Sqrt(0.8 * 1),
		"echo-gomaxprocs-2-over-1":         math.Sqrt(1.5 * 2.2),
		"echo-gomaxprocs-2-over-1-per-cpu": math.Sqrt(1.5 / 1.8 * 2.2 / 1.9),
	} {
		got := target(t, lab.Options{}, key).Evaluate(rows)
		if got.Value == nil || math.Abs(*got.Value-want) > 1e-9 || got.Pairs != 2 || got.Bound != "" {
			t.Errorf("%s: %v over %d pairs, bound %q: want %.4f over 2, shown, not judged", key, value(got.Value), got.Pairs, got.Bound, want)
		}
	}
	bare := &labresult.Row{Key: echoNoMetrics, PerRun: []labresult.RunValues{run(1, 100000, 0), run(2, 70000, 0)}}
	if got := target(t, lab.Options{}, "echo-metrics-on-over-off-per-cpu").Evaluate([]*labresult.Row{on, bare}); got.Value != nil {
		t.Errorf("no CPU must give no ratio per CPU-second: %v", *got.Value)
	}
}

// value formats a figure that may not have been measured.
func value(v *float64) string {
	if v == nil {
		return "not measured"
	}
	return fmt.Sprintf("%.4f", *v)
}

// TestFetchNote: the memory per group is the peak over the idle gateway,
// and a drain shows no latency.
func TestFetchNote(t *testing.T) {
	lost := int64(0)
	row := &labresult.Row{RSSMBMax: labresult.F(230), P99MS: labresult.F(3), Lost: &lost}
	fetchNote(row, 30, 10, 60000)
	if row.Value(rssMBPerGroup) != 20 || row.P99MS != nil {
		t.Errorf("figures %v, p99 %v: want 20 MB per group and no latency", row.Figures, row.P99MS)
	}
	for _, want := range []string{"60,000 messages", "20.00 MB per group", "0 lost"} {
		if !strings.Contains(row.Note, want) {
			t.Errorf("note lacks %q: %s", want, row.Note)
		}
	}
}

// TestTickerNoteSaturated: a ticker row that acked well under the rate
// its streams offer says its latencies are a saturated system's.
func TestTickerNoteSaturated(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		rps      float64
		offered  string
		want     bool
	}{{time.Second, 9950, "10,000", false}, {time.Second, 5107, "10,000", true}, {quietInterval, 330, "333", false}, {quietInterval, 150, "333", true}} {
		row := &labresult.Row{RPS: labresult.F(tc.rps), CPUAvg: labresult.F(0.63)}
		tickerNote(row, tickerRow{10000, true, tc.interval})
		if got := strings.Contains(row.Note, "SATURATED: "+thousands(int(tc.rps))+" msgs/s acked of the "+tc.offered+" offered"); got != tc.want {
			t.Errorf("%v msgs/s: saturated %v, want %v: %s", tc.rps, got, tc.want, row.Note)
		}
		if !strings.Contains(row.Note, "p99 ~300 ms before aggregation") {
			t.Errorf("the report's figure is missing: %s", row.Note)
		}
	}
}
