package databusexp

import (
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/labresult"
)

// TestSubscribeNote checks that the figures per gateway CPU-second are
// per drain (its rate over its own cores), then the median: a median
// rate over a median CPU would give 1,500 cycles here, not 1,000.
func TestSubscribeNote(t *testing.T) {
	drain := func(cycles, msgs, cpu float64) labresult.RunValues {
		return labresult.RunValues{Values: map[string]float64{cyclesPerS.Name: cycles, receivedPerS.Name: msgs, labresult.CPUAvg.Name: cpu}}
	}
	lost := int64(0)
	row := &labresult.Row{Key: subscribeKey, CPUAvg: labresult.F(0.5), MeanMS: labresult.F(0), P99MS: labresult.F(0), Lost: &lost,
		PerRun: []labresult.RunValues{drain(1000, 100000, 1), drain(600, 60000, 0.5), drain(300, 30000, 0.2)}}
	row.Set(cyclesPerS, 600)
	row.Set(gatewayCPUPerMsg, 7.5)
	subscribeNote(row, 50000)
	if got := row.Value(cyclesPerGatewayCPU); got != 1200 {
		t.Errorf("cycles per gateway CPU-second %v, want 1200 (the median of 1000, 1200, 1500)", got)
	}
	if got := row.Value(msgsPerGatewayCPU); got != 120000 {
		t.Errorf("msgs per gateway CPU-second %v, want 120,000", got)
	}
	if row.Value(gatewayCores) != 0.5 || row.MeanMS != nil || row.P99MS != nil {
		t.Errorf("cores %v, mean %v, p99 %v: want 0.5 and no latency (a drain times none)", row.Value(gatewayCores), row.MeanMS, row.P99MS)
	}
	for _, want := range []string{"get-ack cycles 1,200 (1,000-1,500, 3 runs)", "messages 120,000 (100,000-150,000, 3 runs)", "0 lost", "7.50 µs of gateway CPU per message"} {
		if !strings.Contains(row.Note, want) {
			t.Errorf("note lacks %q: %s", want, row.Note)
		}
	}

	row = &labresult.Row{Key: subscribeKey, PerRun: []labresult.RunValues{drain(600, 60000, 0.5), drain(600, 60000, 0)}}
	if subscribeNote(row, 1); !strings.Contains(row.Note, "not measured") || row.Get(cyclesPerGatewayCPU) != nil {
		t.Errorf("a drain without CPU must leave no figure per CPU-second: %v, %s", row.Figures, row.Note)
	}
}
