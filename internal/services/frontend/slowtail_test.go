package frontend

import (
	"context"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/loadgen"
)

// TestAdaptiveKeepsASlowTail: against report E's back (100 ms answers, 1
// in 10 taking 10 s) at a steady 1000 req/s, the adaptive limit succeeds
// at least as often as the timeout alone (about 90%, the slow tenth cut at
// 3 s). A slow tail is not overload: a limiter that read it as such shed
// half the requests (55% success in the lab run that found it).
func TestAdaptiveKeepsASlowTail(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 15 s of load per policy")
	}
	success := map[Policy]float64{}
	for _, p := range []Policy{Timeout, Adaptive} {
		_, back := startBack(t, backend.Config{Delay: 100 * time.Millisecond, SlowFraction: 0.1, SlowDelay: 10 * time.Second})
		_, front := startFront(t, Config{Backend: back, Policy: p})
		res, err := loadgen.Run(context.Background(), front, loadgen.Rate(1000), loadgen.Connections(5000),
			loadgen.Duration(15*time.Second), loadgen.Timeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		success[p] = res.SuccessRatio
		t.Logf("%s: %d requests, success %.2f%%, status %v, errors %v", p, res.Requests, 100*res.SuccessRatio, res.StatusCodes, res.Errors)
	}
	// 2 points of slack: which tenth is slow is random.
	if success[Adaptive] < success[Timeout]-0.02 {
		t.Errorf("adaptive succeeded for %.2f%% of requests, the timeout alone for %.2f%%: the limiter sheds for a slow tail",
			100*success[Adaptive], 100*success[Timeout])
	}
}
