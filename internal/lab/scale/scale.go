// Package scale is report A1's experiment: a stateless CPU-bound service
// (hlab serve work), one instance against three behind a round-robin load
// balancer, each instance at 0.2 CPU and 500 MB like the report's
// containers, under wrk-like closed-model load with 1 and 3 connections,
// plus an open-model sweep for the highest rate whose p99 stays under 100 ms.
package scale

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// The report's container limits.
const (
	instanceCPU   = 0.2
	instanceMemMB = 500
	maxP99        = 100 * time.Millisecond
)

// Row labels; the claim refers to them.
const (
	oneC1   = "one instance, 1 connection"
	oneC3   = "one instance, 3 connections"
	threeC1 = "three instances + LB, 1 connection"
	threeC3 = "three instances + LB, 3 connections"
)

// Experiment is report A1's scale experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

func (*Experiment) Name() string { return "scale" }

func (*Experiment) Title() string {
	return "stateless scaling: one CPU-bound instance vs three behind a load balancer (report A1)"
}

func (*Experiment) Claims() []lab.Claim {
	return []lab.Claim{{
		Text:      "three replicas behind a load balancer serve >= 2x the requests per second of one (1 connection)",
		Metric:    "rps",
		Numerator: threeC1, Denominator: oneC1,
		AtLeast: 2,
	}}
}

// timing returns the per-run duration, the sweep's probe duration and count.
func timing(o lab.Options) (run, probe time.Duration, probes int) {
	if o.Mode == lab.Full {
		return o.RunDuration(5*time.Second, 0), 5 * time.Second, 8
	}
	return o.RunDuration(5*time.Second, 3*time.Second), 2 * time.Second, 6
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	run, probe, probes := timing(o)
	closed := 4 * (o.Warmup() + time.Duration(o.Repeats())*run)
	sweeps := 2 * time.Duration(probes) * probe
	return closed + sweeps + 5*time.Second // start-up of services and the LB
}

func ref(rps, meanMS float64) *lab.Ref { return &lab.Ref{RPS: lab.F(rps), MeanMS: lab.F(meanMS)} }

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	runDur, probeDur, probes := timing(run.Opts)
	run.SetEnv("instance_quota", fmt.Sprintf("%.1f CPU, %d MB each", instanceCPU, instanceMemMB))
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("load", "hlab load, closed model (wrk -tN -cN); open model for the sweep")
	run.SetEnv("workload", "GET /handle: 1001 x json.Marshal of a random 10-letter string")

	closed := func(label, url string, procs []*sandbox.Process, conns int, r *lab.Ref) (*lab.Row, error) {
		return run.Measure(ctx, lab.Measurement{
			Label: label, URL: url, Procs: procs, Ref: r, Duration: runDur,
			Load: []loadgen.Option{loadgen.Connections(conns)},
		})
	}
	sweep := func(label, url string, procs []*sandbox.Process, start float64) (*lab.Row, error) {
		return run.MaxRate(ctx, lab.Sweep{
			Label: label, URL: url, Procs: procs, MaxP99: maxP99,
			Start: start, Probes: probes, Duration: probeDur,
		})
	}

	// One instance, addressed directly as in the report.
	one, err := run.StartService(ctx, "work", instanceCPU, instanceMemMB)
	if err != nil {
		return err
	}
	defer one.Stop()
	procs := []*sandbox.Process{one.Proc}
	// Rows are added as they are measured, so a failure later keeps them.
	r1, err := closed(oneC1, one.URL("/handle"), procs, 1, ref(169, 22.55))
	if err != nil {
		return err
	}
	run.AddRow(r1)
	r3, err := closed(oneC3, one.URL("/handle"), procs, 3, ref(74, 45.85))
	if err != nil {
		return err
	}
	run.AddRow(r3)
	oneSweep, err := sweep("one instance, open model: max rate with p99 < 100 ms", one.URL("/handle"), procs, 0.8*max(*r1.RPS, *r3.RPS))
	if err != nil {
		return err
	}
	run.AddRow(oneSweep)
	one.Stop()

	// Three instances behind the load balancer, which runs unconstrained.
	var upstreams []string
	procs = nil
	for range 3 {
		s, err := run.StartService(ctx, "work", instanceCPU, instanceMemMB)
		if err != nil {
			return err
		}
		defer s.Stop()
		upstreams = append(upstreams, s.Addr)
		procs = append(procs, s.Proc)
	}
	lb, err := run.StartLB(ctx, upstreams)
	if err != nil {
		return err
	}
	defer lb.Stop()
	run.SetEnv("lb", lb.Kind)
	t1, err := closed(threeC1, lb.URL("/handle"), procs, 1, ref(450, 9.09))
	if err != nil {
		return err
	}
	run.AddRow(t1)
	t3, err := closed(threeC3, lb.URL("/handle"), procs, 3, ref(325, 22.41))
	if err != nil {
		return err
	}
	run.AddRow(t3)
	threeSweep, err := sweep("three instances + LB, open model: max rate with p99 < 100 ms", lb.URL("/handle"), procs, 0.8*max(*t1.RPS, *t3.RPS))
	if err != nil {
		return err
	}
	run.AddRow(threeSweep)
	return nil
}
