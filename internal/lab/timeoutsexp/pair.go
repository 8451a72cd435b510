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

// pair is a back and a front in front of it, with the configs they were
// started with.
type pair struct {
	back, front *lab.Service
	bc          backend.Config
	fc          frontend.Config
	// The quotas they were started with (0: none).
	backCPU, frontCPU     float64
	backMemMB, frontMemMB int
}

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
	bc := claimBack()
	if !s.slow {
		bc.SlowFraction = 0
	}
	p := &pair{bc: bc, frontCPU: frontCPU, frontMemMB: frontMemMB} // the back unconstrained, as the report's
	back, err := run.StartService(ctx, "backend", p.backCPU, p.backMemMB, backArgs(bc)...)
	if err != nil {
		return nil, err
	}
	p.back, p.fc = back, claimFront(s.policy, back.URL("/"))
	if s.policy == frontend.Hedge {
		p.fc.HedgeDelay = hedgeDelay
	}
	if p.front, err = run.StartService(ctx, "frontend", p.frontCPU, p.frontMemMB, p.fc.Args()...); err != nil {
		back.Stop()
		return nil, err
	}
	return p, nil
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
