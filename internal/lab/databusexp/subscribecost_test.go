package databusexp

import (
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// TestSubscribeCostTarget checks that the subscribe cost target pairs
// the gateway's drains with the direct consumer's by round, the
// gateway's CPU per message over the consumer's, against 1.3.
func TestSubscribeCostTarget(t *testing.T) {
	cost := target(t, lab.Options{}, "subscribe-cost-cpu-per-msg")
	rows := func(gwUs, directUs []float64) []*labresult.Row {
		gw, direct := &labresult.Row{Key: subscribeKey}, &labresult.Row{Key: subscribeDirectKey}
		for i := range gwUs {
			gw.PerRun = append(gw.PerRun, labresult.RunValues{Round: i + 1, Values: map[string]float64{gatewayCPUPerMsg.Name: gwUs[i]}})
			direct.PerRun = append(direct.PerRun, labresult.RunValues{Round: i + 1, Values: map[string]float64{consumerCPUPerMsg.Name: directUs[i]}})
		}
		return []*labresult.Row{gw, direct}
	}
	for _, tc := range []struct {
		name           string
		gwUs, directUs []float64
		verdict        labresult.TargetVerdict
	}{
		{"within the bound", []float64{1.1, 1.2, 1.15}, []float64{1, 1, 1}, labresult.Holds},
		{"beyond it", []float64{1.5, 1.6, 1.55}, []float64{0.4, 0.41, 0.39}, labresult.Fails},
	} {
		got := cost.Evaluate(rows(tc.gwUs, tc.directUs))
		if got.Pairs != 3 || got.Verdict != tc.verdict || got.Spread == nil {
			t.Errorf("%s: %d pairs, %s (%s), spread %v; want 3 pairs, %s", tc.name, got.Pairs, got.Verdict, got.Why, got.Spread, tc.verdict)
		}
		if got.Metric != gatewayCPUPerMsg.Name || got.DenMetric != consumerCPUPerMsg.Name || got.Bound != "<= 1.3" {
			t.Errorf("%s: reads %s over %s, bound %q", tc.name, got.Metric, got.DenMetric, got.Bound)
		}
	}
}
