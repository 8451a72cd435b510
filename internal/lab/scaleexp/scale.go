// Package scaleexp is report A1's experiment: a stateless CPU-bound
// service (hlab serve work, the report's handler), one instance against
// three behind a round-robin load balancer with the report's nginx config
// (nginx's defaults: a new upstream connection per request), each
// instance at 0.2 CPU and 500 MB like the report's containers, under
// wrk-like closed-model load with 1 and 3 connections (a claim each, the
// report's two ratios). Ours follow: the balancer with upstream keepalive
// (claim 3), the report's pro and con as fault rows (a replica, then the
// balancer, SIGKILLed under load), and in --full an open-model sweep for
// the highest rate whose p99 stays under 100 ms.
package scaleexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/work"
	"github.com/highload-lab/hlab/loadgen"
)

// The report's container limits.
const (
	instanceCPU   = 0.2
	instanceMemMB = 500
	maxP99        = 100 * time.Millisecond
)

// Row keys.
const (
	oneC1       labresult.Key = "one/c1"
	oneC3       labresult.Key = "one/c3"
	threeC1     labresult.Key = "three-lb/c1"
	threeC3     labresult.Key = "three-lb/c3"
	threeKeepC3 labresult.Key = "three-lb-keepalive/c3"
	oneSweep    labresult.Key = "one/open-max-rate"
	threeSweep  labresult.Key = "three-lb/open-max-rate"
)

// keepalive is the idle upstream connections of ours, claim 3's balancer:
// nginx's "keepalive 64", or the built-in balancer's 64 per upstream.
const keepalive = 64

// Experiment is report A1's scale experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

// ref is a row's figures in the report: the table's requests per second,
// and wrk's mean and max latency.
func ref(rps, meanMS, maxMS float64) *labresult.Ref {
	return &labresult.Ref{RPS: labresult.F(rps), MeanMS: labresult.F(meanMS), MaxMS: labresult.F(maxMS)}
}

func (*Experiment) Spec(o lab.Options) lab.Spec {
	s := lab.Spec{
		Name:  "scale",
		Title: "stateless scaling: one CPU-bound instance vs three behind a load balancer (report A1)",
		Rows: []lab.RowSpec{
			lab.RefRow(oneC1, "one instance, 1 connection", ref(169, 22.55, 91.44)),
			lab.RefRow(threeC1, "three instances + LB, 1 connection", ref(450, 9.09, 68.66)),
			lab.RefRow(oneC3, "one instance, 3 connections", ref(74, 45.85, 195.06)),
			lab.RefRow(threeC3, "three instances + LB, 3 connections", ref(325, 22.41, 95.08)),
			lab.Row(threeKeepC3, "ours: three instances + LB with upstream keepalive, 3 connections"),
		},
		Claims: []labresult.Claim{{
			Text:   "three replicas behind a load balancer serve >= 2x the requests per second of one (1 connection)",
			Ratio:  labresult.Ratio{Num: threeC1, Den: oneC1, Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(2),
			Report: "450 / 169 = 2.66", ReportRatio: 450.0 / 169,
		}, {
			Text:   "three replicas behind a load balancer serve >= 2x the requests per second of one (3 connections)",
			Ratio:  labresult.Ratio{Num: threeC3, Den: oneC3, Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(2),
			Report: "325 / 74 = 4.39", ReportRatio: 325.0 / 74,
		}, {
			Text:   "ours: three replicas behind a load balancer with upstream keepalive serve >= 2x the requests per second of one (3 connections)",
			Ratio:  labresult.Ratio{Num: threeKeepC3, Den: oneC3, Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(2),
			Report: "not measured: the report's nginx kept no upstream connection",
		}},
		Targets: append([]labresult.Target{{
			Key:   "keepalive-gain",
			Text:  "what upstream keepalive adds to three replicas behind the balancer at 3 connections (ours over the report's config)",
			Ratio: &labresult.Ratio{Num: threeKeepC3, Den: threeC3, Metric: labresult.RPS.Name},
		}}, faultTargets(o)...),
		Metrics: []labresult.Metric{lbRetries},
		Figures: figures(),
		Setup:   setup(o),
	}
	s.Rows = append(s.Rows, faultRowSpecs(o)...)
	if _, _, probes := timing(o); probes > 0 {
		s.Rows = append(s.Rows,
			lab.Row(oneSweep, "one instance, open model: max rate with p99 < 100 ms"),
			lab.Row(threeSweep, "three instances + LB, open model: max rate with p99 < 100 ms"))
	}
	return s
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
	// Two paired sets, of two rows and of three; about five rounds decide each.
	pairs := (2 + 3) * 5 * (run + 300*time.Millisecond)
	sweeps := 2 * time.Duration(probes) * probe
	faults := time.Duration(len(faultRowSpecs(o))) * (faultRun + time.Second)
	return 5*o.Warmup() + pairs + faults + sweeps + 6*time.Second // start-up of services and the balancers
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	run.SetEnv("instance_quota", fmt.Sprintf("%.1f CPU, %d MB each", instanceCPU, instanceMemMB))
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("load", "hlab load, closed model (wrk -tN -cN); open model for the fault rows and the sweep")
	run.SetEnv("workload", "GET /handle: the report's 1001 x json.Marshal of randSeq(10) (runes, Go 1.19's locked math/rand source)")
	run.SetEnv("method", "one instance and three behind the load balancer run at once; the claims' rows (1 connection, then 3 with ours) run in rounds, their order alternating")
	b, err := start(ctx, run)
	if err != nil {
		return err
	}
	sets := [][]labresult.Key{{oneC1, threeC1}, {oneC3, threeC3, threeKeepC3}}
	for _, rows := range sets {
		if err := b.closed(ctx, rows); err != nil {
			return err
		}
	}
	if err := b.faults(ctx); err != nil {
		return err
	}
	return b.sweeps(ctx)
}

// bench is the experiment's services: one instance, addressed directly as
// in the report, and three behind the load balancer with the report's
// config, and behind ours with upstream keepalive; the balancers run
// unconstrained. The run stops them when the experiment ends.
type bench struct {
	run      *lab.Run
	one      *lab.Service
	three    []*lab.Service
	lb, keep *lab.LB
	measured map[labresult.Key]*labresult.Row
}

func start(ctx context.Context, run *lab.Run) (*bench, error) {
	b := &bench{run: run, measured: map[labresult.Key]*labresult.Row{}}
	var err error
	// The work service runs the report's handler, whatever its flags: the
	// claims' rows run with it.
	run.UsedInFirstClaim(itemWork, work.Code)
	if b.one, err = run.StartService(ctx, "work", instanceCPU, instanceMemMB); err != nil {
		return nil, err
	}
	run.Cleanup(func() { b.one.Stop() })
	for range 3 {
		s, err := run.StartService(ctx, "work", instanceCPU, instanceMemMB)
		if err != nil {
			return nil, err
		}
		run.Cleanup(func() { s.Stop() })
		b.three = append(b.three, s)
	}
	if b.lb, err = run.StartLB(ctx, b.upstreams(), 0); err != nil {
		return nil, err
	}
	run.Cleanup(func() { b.lb.Stop() })
	run.UsedInFirstClaim(itemLBConfig, b.lb.Config)
	if b.lb.Frame != "" {
		run.UsedInFirstClaim(itemNginxMain, b.lb.Frame)
	}
	if b.keep, err = run.StartLB(ctx, b.upstreams(), keepalive); err != nil {
		return nil, err
	}
	run.Cleanup(func() { b.keep.Stop() })
	run.SetEnv("lb", b.lb.Kind)
	return b, nil
}

// target is where a row's load goes and whose CPU and memory it reports.
func (b *bench) target(key labresult.Key) (url string, procs []*sandbox.Process) {
	if key == oneC1 || key == oneC3 || key == oneSweep {
		return b.one.URL("/handle"), []*sandbox.Process{b.one.Proc}
	}
	for _, s := range b.three {
		procs = append(procs, s.Proc)
	}
	if key == threeKeepC3 {
		return b.keep.URL("/handle"), procs
	}
	return b.lb.URL("/handle"), procs
}

// closed measures claims' rows, one instance and three, in rounds under
// the closed model: 1 connection for oneC1/threeC1, 3 for the others.
func (b *bench) closed(ctx context.Context, rows []labresult.Key) error {
	runDur, _, _ := timing(b.run.Opts)
	conns := map[labresult.Key]int{oneC1: 1, threeC1: 1, oneC3: 3, threeC3: 3, threeKeepC3: 3}
	var ms []lab.Measurement
	for _, key := range rows {
		url, procs := b.target(key)
		ms = append(ms, lab.Measurement{Key: key, Procs: procs, Duration: runDur,
			Driver: lab.HTTP{URL: url, Load: []loadgen.Option{loadgen.Connections(conns[key])}}})
	}
	measured, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms})
	// Rows are added as they are measured, so a failure later keeps them.
	for _, r := range measured {
		b.measured[r.Key] = r
		b.run.AddRow(r)
	}
	return err
}

// sweeps finds, in --full, the highest open-model rate whose p99 stays
// under maxP99, for one instance and for three, from 0.8x the best
// closed-model rate.
func (b *bench) sweeps(ctx context.Context) error {
	_, probe, probes := timing(b.run.Opts)
	if probes == 0 {
		b.run.Note("the open-model sweeps (the highest rate whose p99 stays under %v) run in --full", maxP99)
		return nil
	}
	for _, s := range []struct{ key, c1, c3 labresult.Key }{{oneSweep, oneC1, oneC3}, {threeSweep, threeC1, threeC3}} {
		url, procs := b.target(s.key)
		start := 0.8 * max(b.measured[s.c1].Value(labresult.RPS), b.measured[s.c3].Value(labresult.RPS))
		row, err := b.run.MaxRate(ctx, lab.Sweep{Key: s.key, URL: url, Procs: procs, MaxP99: maxP99, Start: start, Probes: probes, Duration: probe})
		if err != nil {
			return err
		}
		b.run.AddRow(row)
	}
	return nil
}
