package timeoutsexp

import (
	"context"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/internal/services/frontend"
	"github.com/highload-lab/hlab/loadgen"
)

// pair is a back and a front in front of it.
type pair struct{ back, front *lab.Service }

func (p *pair) stop() {
	p.front.Stop() // before the back: its calls end, so the back stops at once
	p.back.Stop()
}

// settle waits until the front has no request in flight (the slow ones of
// the run before), at most max.
func (p *pair) settle(ctx context.Context, max time.Duration) error {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		m, err := lab.Scrape(ctx, p.front.URL("/metrics"))
		if err == nil && m["frontend_inflight_requests"] == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil // measured anyway: the row's figures carry what was left
}

// startPair starts a back for s and a front with s's policy.
func startPair(ctx context.Context, run *lab.Run, s setup, hedgeDelay time.Duration) (*pair, error) {
	bc := backend.Config{Delay: fastDelay, SlowDelay: slowDelay}
	if s.slow {
		bc.SlowFraction = slowFraction
	}
	backArgs := bc.Args()
	if !s.slow {
		// Args leaves a zero field out (it means the flag's default), and
		// --slow-fraction defaults to the report's 1 in 10: none is said.
		backArgs = append(backArgs, "--slow-fraction=0")
	}
	back, err := run.StartService(ctx, "backend", 0, 0, backArgs...)
	if err != nil {
		return nil, err
	}
	fc := frontend.Config{Backend: back.URL("/"), Policy: s.policy, Timeout: deadline}
	if s.policy == frontend.Hedge {
		fc.HedgeDelay = hedgeDelay
	}
	front, err := run.StartService(ctx, "frontend", frontCPU, frontMemMB, fc.Args()...)
	if err != nil {
		back.Stop()
		return nil, err
	}
	return &pair{back: back, front: front}, nil
}

// measurement is st's row on p.
func measurement(p *pair, st step, o lab.Options) lab.Measurement {
	m := lab.Measurement{
		Key: st.key(), Procs: []*sandbox.Process{p.front.Proc},
		Duration: st.run, Repeat: o.Repeats(), NoWarmup: true,
		Counters: []lab.Counter{
			{Metric: frontRequests, URL: p.front.URL("/metrics"), Name: "frontend_requests_total"},
			{Metric: backRequests, URL: p.back.URL("/metrics"), Name: "backend_requests_total"},
			{Metric: hedgesDenied, URL: p.front.URL("/metrics"), Name: "frontend_hedges_denied_total"},
		},
		// Memory in both models, once in flight has settled: at the equal
		// rate of the open model, and at the rates the two setups reach in
		// the closed one, the report's first comparison, which it then
		// corrects (see conclude).
		SampleFrom: st.from, SampleTo: st.to,
		Metrics: []string{p.front.URL("/metrics")},
	}
	if st.s.slow && st.s.policy != frontend.None {
		m.MinSuccess = successBound
	}
	if st.conns > 0 {
		// The run ends at its duration: throughput is the answers within it.
		m.Driver = lab.HTTP{URL: p.front.URL("/"), Cut: true,
			Load: []loadgen.Option{loadgen.Connections(st.conns), loadgen.Timeout(loadTimeout)}}
	} else {
		m.Driver = lab.HTTP{URL: p.front.URL("/"),
			Load: []loadgen.Option{loadgen.Rate(openRate), loadgen.Connections(openConnsCap), loadgen.Timeout(loadTimeout)}}
	}
	return m
}
