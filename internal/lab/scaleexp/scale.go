// Package scale is report A1's experiment: a stateless CPU-bound service
// (hlab serve work), one instance against three behind a round-robin load
// balancer, each instance at 0.2 CPU and 500 MB like the report's
// containers, under wrk-like closed-model load with 1 and 3 connections
// (a claim each, the report's two ratios), plus an open-model sweep for the highest rate whose p99 stays under 100 ms.
package scaleexp

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
		Report:  "450 / 169 = 2.66",
	}, {
		Text:      "three replicas behind a load balancer serve >= 2x the requests per second of one (3 connections)",
		Metric:    "rps",
		Numerator: threeC3, Denominator: oneC3,
		AtLeast: 2,
		Report:  "325 / 74 = 4.39",
	}}
}

// timing returns the per-run duration (the report's wrk ran 5 s), the
// sweep's probe duration and count (--full only).
func timing(o lab.Options) (run, probe time.Duration, probes int) {
	if o.Mode == lab.Full {
		return 5 * time.Second, 5 * time.Second, 8
	}
	return 5 * time.Second, 5 * time.Second, 0
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	run, probe, probes := timing(o)
	pairs := 2 * 2 * 5 * (run + 300*time.Millisecond) // two claims; about five pairs decide each
	sweeps := 2 * time.Duration(probes) * probe
	return 4*o.Warmup() + pairs + sweeps + 5*time.Second // start-up of services and the LB
}

func ref(rps, meanMS float64) *lab.Ref { return &lab.Ref{RPS: lab.F(rps), MeanMS: lab.F(meanMS)} }

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	runDur, probeDur, probes := timing(run.Opts)
	run.SetEnv("instance_quota", fmt.Sprintf("%.1f CPU, %d MB each", instanceCPU, instanceMemMB))
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("load", "hlab load, closed model (wrk -tN -cN); open model for the sweep")
	run.SetEnv("workload", "GET /handle: 1001 x json.Marshal of a random 10-letter string")
	run.SetEnv("method", "one instance and three behind the load balancer run at once; the claims' rows (1 connection, then 3) run as pairs, their order alternating")

	// One instance, addressed directly as in the report, and three behind
	// the load balancer, which runs unconstrained.
	one, err := run.StartService(ctx, "work", instanceCPU, instanceMemMB)
	if err != nil {
		return err
	}
	defer one.Stop()
	var upstreams []string
	var procs []*sandbox.Process
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
	oneProcs := []*sandbox.Process{one.Proc}

	closed := func(label, url string, procs []*sandbox.Process, conns int, r *lab.Ref) lab.Measurement {
		return lab.Measurement{
			Label: label, URL: url, Procs: procs, Ref: r, Duration: runDur,
			Load: []loadgen.Option{loadgen.Connections(conns)},
		}
	}
	rows, err := run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{
		closed(oneC1, one.URL("/handle"), oneProcs, 1, ref(169, 22.55)),
		closed(threeC1, lb.URL("/handle"), procs, 1, ref(450, 9.09)),
	}})
	if err != nil {
		return err
	}
	// Rows are added as they are measured, so a failure later keeps them.
	for _, r := range rows {
		run.AddRow(r)
	}
	rows3, err := run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{
		closed(oneC3, one.URL("/handle"), oneProcs, 3, ref(74, 45.85)),
		closed(threeC3, lb.URL("/handle"), procs, 3, ref(325, 22.41)),
	}})
	if err != nil {
		return err
	}
	for _, r := range rows3 {
		run.AddRow(r)
	}
	r3, t3 := rows3[0], rows3[1]
	if probes == 0 {
		run.Note("the open-model sweeps (the highest rate whose p99 stays under %v) run in --full", maxP99)
		return nil
	}
	sweep := func(label, url string, procs []*sandbox.Process, start float64) (*lab.Row, error) {
		return run.MaxRate(ctx, lab.Sweep{
			Label: label, URL: url, Procs: procs, MaxP99: maxP99,
			Start: start, Probes: probes, Duration: probeDur,
		})
	}
	oneSweep, err := sweep("one instance, open model: max rate with p99 < 100 ms", one.URL("/handle"), oneProcs, 0.8*max(*rows[0].RPS, *r3.RPS))
	if err != nil {
		return err
	}
	run.AddRow(oneSweep)
	threeSweep, err := sweep("three instances + LB, open model: max rate with p99 < 100 ms", lb.URL("/handle"), procs, 0.8*max(*rows[1].RPS, *t3.RPS))
	if err != nil {
		return err
	}
	run.AddRow(threeSweep)
	return nil
}
