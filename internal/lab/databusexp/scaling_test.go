package databusexp

import (
	"math"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
)

// TestScalingNotes checks that the metrics' cost and the GOMAXPROCS
// ratio are taken per round (runs paired by round, not position), then
// their median, with the report's figure beside them.
func TestScalingNotes(t *testing.T) {
	run := func(round int, rps, cpu float64) lab.RunValues {
		return lab.RunValues{Round: round, Values: map[string]float64{"rps": rps, "cpu_avg": cpu}}
	}
	on := &lab.Row{Figures: map[string]float64{}, PerRun: []lab.RunValues{run(1, 80000, 1), run(2, 70000, 1)}}
	off := &lab.Row{Figures: map[string]float64{}, PerRun: []lab.RunValues{run(2, 70000, 0.875), run(1, 100000, 1)}}
	// Per CPU-second: round 1 80,000 against 100,000 (20%), round 2
	// 70,000 against 80,000 (12.5%).
	note := metricsCostNote(on, off)
	if got := off.Figures["metrics_cost_pct"]; math.Abs(got-16.25) > 1e-9 {
		t.Errorf("metrics cost %v%%, want 16.25 (the median of 20 and 12.5)", got)
	}
	for _, want := range []string{"12.5%-20.0%, 2 runs", "~17%"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q: %s", want, note)
		}
	}

	two := &lab.Row{Figures: map[string]float64{}, PerRun: []lab.RunValues{run(1, 120000, 1.8), run(2, 154000, 1.9)}}
	note = gomaxprocsNote(on, two)
	if got := two.Figures["ratio_to_gomaxprocs_1"]; math.Abs(got-1.85) > 1e-9 {
		t.Errorf("ratio %v, want 1.85 (the median of 1.5 and 2.2)", got)
	}
	if !strings.Contains(note, "almost linearly") || !strings.Contains(note, "same 2 cores") {
		t.Errorf("note lacks the report's figure or the machine's caveat: %s", note)
	}

	bare := &lab.Row{Figures: map[string]float64{}, PerRun: []lab.RunValues{{Round: 1, Values: map[string]float64{"rps": 1}}}}
	if note := metricsCostNote(bare, bare); !strings.Contains(note, "not measured") || len(bare.Figures) != 0 {
		t.Errorf("no CPU must give no cost: %v, %s", bare.Figures, note)
	}
}

// TestFetchNote: the memory per group is the peak over the idle gateway,
// and a drain shows no latency.
func TestFetchNote(t *testing.T) {
	lost := int64(0)
	row := &lab.Row{RSSMBMax: lab.F(230), P99MS: lab.F(3), Lost: &lost, Figures: map[string]float64{}}
	note := fetchNote(row, 30, 10, 60000)
	if row.Figures["rss_mb_per_group"] != 20 || row.P99MS != nil {
		t.Errorf("figures %v, p99 %v: want 20 MB per group and no latency", row.Figures, row.P99MS)
	}
	for _, want := range []string{"60,000 messages", "20.00 MB per group", "0 lost"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q: %s", want, note)
		}
	}
}

// TestTickerNoteSaturated: a ticker row that acked well under the rate
// its streams offer says its latencies are a saturated system's.
func TestTickerNoteSaturated(t *testing.T) {
	for _, tc := range []struct {
		rps  float64
		want bool
	}{{9950, false}, {5107, true}} {
		row := &lab.Row{RPS: lab.F(tc.rps), CPUAvg: lab.F(0.63), Figures: map[string]float64{}}
		note := tickerNote(row, 10000, true)
		if got := strings.Contains(note, "SATURATED: "+thousands(int(tc.rps))+" msgs/s acked of the 10,000 offered"); got != tc.want {
			t.Errorf("%v msgs/s: saturated %v, want %v: %s", tc.rps, got, tc.want, note)
		}
		if !strings.Contains(note, "p99 ~300 ms before aggregation") {
			t.Errorf("the report's figure is missing: %s", note)
		}
	}
}
