package databusexp

import (
	"testing"

	"github.com/highload-lab/hlab/internal/checker"
)

// TestCheckerSampleOfADrain: a consume-only run's successes are the
// messages received over the drain, and it has no latency (the row
// would otherwise report a publish latency of 0 and a rate of 0).
func TestCheckerSampleOfADrain(t *testing.T) {
	res := &checker.Result{Errors: map[string]int64{}, Delivery: &checker.Delivery{
		Groups: 1, Members: 4, Consume: checker.Only, Acked: 1000, Received: 1000, Cycles: 10, DrainS: 0.5,
		ReceivedPerSec: 2000, CyclesPerSec: 20,
	}}
	s := checkerSample(res, -1)
	if s.Goodput() != 2000 || s.Requests != 1000 || s.Connections != 4 || s.Percentiles != nil || s.Lost == nil || *s.Lost != 0 {
		t.Fatalf("goodput %v, %d requests, %d connections, percentiles %v, lost %v: want 2000/s, 1000, 4, none, 0",
			s.Goodput(), s.Requests, s.Connections, s.Percentiles, s.Lost)
	}
	if s.Figures["cycles_per_s"] != 20 {
		t.Fatalf("figures %v", s.Figures)
	}
}
