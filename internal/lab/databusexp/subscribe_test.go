package databusexp

import (
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
)

// TestSubscribeNote checks that the figures per gateway CPU-second are
// per drain (its rate over its own cores), then the median: a median
// rate over a median CPU would give 1,500 cycles here, not 1,000.
func TestSubscribeNote(t *testing.T) {
	drain := func(cycles, msgs, cpu float64) lab.RunValues {
		return lab.RunValues{Values: map[string]float64{"cycles_per_s": cycles, "received_per_s": msgs, "cpu_avg": cpu}}
	}
	lost := int64(0)
	row := &lab.Row{Label: subscribeRow, CPUAvg: lab.F(0.5), MeanMS: lab.F(0), P99MS: lab.F(0), Lost: &lost,
		Figures: map[string]float64{"cycles_per_s": 600},
		PerRun:  []lab.RunValues{drain(1000, 100000, 1), drain(600, 60000, 0.5), drain(300, 30000, 0.2)}}
	note := subscribeNote(row, 50000)
	if got := row.Figures["cycles_per_gateway_cpu_s"]; got != 1200 {
		t.Errorf("cycles per gateway CPU-second %v, want 1200 (the median of 1000, 1200, 1500)", got)
	}
	if got := row.Figures["msgs_per_gateway_cpu_s"]; got != 120000 {
		t.Errorf("msgs per gateway CPU-second %v, want 120,000", got)
	}
	if row.Figures["gateway_cores"] != 0.5 || row.MeanMS != nil || row.P99MS != nil {
		t.Errorf("cores %v, mean %v, p99 %v: want 0.5 and no latency (a drain times none)", row.Figures["gateway_cores"], row.MeanMS, row.P99MS)
	}
	for _, want := range []string{"get-ack cycles 1,200 (1,000-1,500, 3 runs)", "messages 120,000 (100,000-150,000, 3 runs)", "0 lost", "no target"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q: %s", want, note)
		}
	}

	row = &lab.Row{Label: subscribeRow, Figures: map[string]float64{}, PerRun: []lab.RunValues{drain(600, 60000, 0.5), drain(600, 60000, 0)}}
	if note := subscribeNote(row, 1); !strings.Contains(note, "not measured") || row.Figures["cycles_per_gateway_cpu_s"] != 0 {
		t.Errorf("a drain without CPU must leave no figure per CPU-second: %v, %s", row.Figures, note)
	}
}
