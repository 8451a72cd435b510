package scaleexp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// The report's pro and con as rows: "if one replica falls, the others
// keep working", and "the balancer becomes the single point of failure".
// Each row sends an open-model load at faultRate through the balancer
// with the report's config for faultRun, and SIGKILLs a replica, or the
// balancer, a third into it; the row says what clients saw: the share
// answered, the p99 from each request's intended send time, the failures
// by kind.
const (
	faultRate = 100             // requests per second: two instances serve it with room
	faultRun  = 5 * time.Second // the report's wrk duration
	lbOutage  = time.Second     // the balancer is down this long before it starts again
	// faultRowBound is the share a fault row must answer to count as run:
	// low, because the row's target judges its share, and a row under
	// its integrity bound cannot be judged.
	faultRowBound = 0.5
)

// The fault rows.
const (
	faultReplicaNginx   labresult.Key = "fault/replica-killed/nginx"
	faultReplicaBuiltin labresult.Key = "fault/replica-killed/builtin"
	faultLB             labresult.Key = "fault/lb-killed"
)

// lbRetries is the built-in balancer's count of requests sent again.
var lbRetries = labresult.Metric{Name: "lb_retries", Better: labresult.Neither,
	Doc: "requests the built-in balancer sent again to another upstream after one failed (lb_retries_total)"}

// faultRowSpecs are the fault rows a run with o measures: behind nginx
// only when nginx is the balancer.
func faultRowSpecs(o lab.Options) []lab.RowSpec {
	var rows []lab.RowSpec
	if o.UsesNginx() {
		rows = append(rows, lab.Row(faultReplicaNginx, "fault: one of three replicas SIGKILLed under load, behind nginx (the report's config)"))
	}
	return append(rows,
		lab.Row(faultReplicaBuiltin, "fault: one of three replicas SIGKILLed under load, behind the built-in balancer (passive health checks, GET retried)"),
		lab.Row(faultLB, "fault: the load balancer SIGKILLed under load, started again 1 s later"))
}

// faultTargets are what we expect of the fault rows.
func faultTargets(o lab.Options) []labresult.Target {
	var ts []labresult.Target
	if o.UsesNginx() {
		ts = append(ts, labresult.Target{
			Key: "replica-killed-nginx-success",
			Text: "the others keep working (the report's pro): with one of three replicas SIGKILLed, nginx with the report's config " +
				"(its defaults: max_fails=1 fail_timeout=10s, proxy_next_upstream error timeout) answers >= 99% of requests",
			Row: faultReplicaNginx, Metric: labresult.SuccessRatio.Name, Bound: labresult.AtLeast(0.99),
		})
	}
	return append(ts, labresult.Target{
		Key: "replica-killed-builtin-success",
		Text: "the others keep working (the report's pro): with one of three replicas SIGKILLed, the built-in balancer " +
			"(an upstream that fails marked down for 10 s, a failed GET sent to the next) answers >= 99% of requests",
		Row: faultReplicaBuiltin, Metric: labresult.SuccessRatio.Name, Bound: labresult.AtLeast(0.99),
	}, labresult.Target{
		Key: "lb-killed-success",
		Text: "the balancer is the single point of failure (the report's con): SIGKILLed a third into the run and started again " +
			"1 s later, it fails clients' requests however many replicas stand behind it: at most 99% answered",
		Row: faultLB, Metric: labresult.SuccessRatio.Name, Bound: labresult.AtMost(0.99),
	})
}

// faults runs the fault rows, after the claims' rows: each replica it
// kills is started again for the next row.
func (b *bench) faults(ctx context.Context) error {
	victim := b.three[len(b.three)-1]
	survivors := b.procs(b.three[:len(b.three)-1]...)
	killReplica := func(context.Context) error { return victim.Kill() }
	nginx := b.run.Opts.UsesNginx()
	if nginx {
		if err := b.fault(ctx, faultReplicaNginx, b.lb, survivors, killReplica, "one of three replicas SIGKILLed and left down"); err != nil {
			return err
		}
		if err := victim.Restart(ctx); err != nil {
			return err
		}
	}
	builtin := b.lb
	if nginx {
		var err error
		if builtin, err = b.run.StartBuiltinLB(ctx, b.upstreams(), 0); err != nil {
			return err
		}
		defer builtin.Stop()
	}
	if err := b.fault(ctx, faultReplicaBuiltin, builtin, survivors, killReplica, "one of three replicas SIGKILLed and left down"); err != nil {
		return err
	}
	if err := victim.Restart(ctx); err != nil {
		return err
	}
	killLB := func(ctx context.Context) error {
		if err := b.lb.Kill(); err != nil {
			return err
		}
		time.Sleep(lbOutage)
		return b.lb.Restart(ctx)
	}
	return b.fault(ctx, faultLB, b.lb, b.procs(b.three...), killLB, fmt.Sprintf("the balancer (%s) SIGKILLed and started again %v later", b.lb.Kind, lbOutage))
}

// fault measures one fault row: load through lb, the fault a third in.
// procs are the instances that live through it, whose CPU the row shows.
func (b *bench) fault(ctx context.Context, key labresult.Key, lb *lab.LB, procs []*sandbox.Process, inject func(context.Context) error, what string) error {
	d := &faultDriver{
		load:   lab.HTTP{URL: lb.URL("/handle"), Load: []loadgen.Option{loadgen.Rate(faultRate)}},
		inject: inject,
	}
	m := lab.Measurement{Key: key, Driver: d, Procs: procs, Duration: faultRun, Repeat: 1, NoWarmup: true, MinSuccess: faultRowBound}
	if key == faultReplicaBuiltin {
		m.Counters = []lab.Counter{{Metric: lbRetries, URL: lb.URL("/metrics"), Name: "lb_retries_total"}}
	}
	row, err := b.run.Measure(ctx, m)
	if err != nil {
		return fmt.Errorf("%s: %w", b.run.Label(key), err)
	}
	failed := row.Requests - int64(float64(row.Requests)*row.Value(labresult.SuccessRatio)+0.5)
	row.AddNote("%s, %.1f s into a %.0f s run at %d req/s; %d of %d requests failed; the row counts as run above %.0f%% answered, its target judges the share",
		what, d.at.Seconds(), d.ran.Seconds(), faultRate, failed, row.Requests, faultRowBound*100)
	b.run.AddRow(row)
	return nil
}

// procs are the processes of services.
func (b *bench) procs(services ...*lab.Service) []*sandbox.Process {
	var out []*sandbox.Process
	for _, s := range services {
		out = append(out, s.Proc)
	}
	return out
}

// upstreams are the three instances' addresses.
func (b *bench) upstreams() []string {
	var out []string
	for _, s := range b.three {
		out = append(out, s.Addr)
	}
	return out
}

// faultDriver is a fault row's load, with the fault struck a third into
// it; the row fails when the fault did not strike or failed.
type faultDriver struct {
	load    lab.HTTP
	inject  func(context.Context) error
	at, ran time.Duration // when the fault struck, from the load's start, and how long the load ran
}

func (f *faultDriver) Drive(ctx context.Context, d time.Duration, window func(bool)) (*lab.Sample, error) {
	errc := make(chan error, 1)
	start := time.Now()
	t := time.AfterFunc(d/3, func() {
		f.at = time.Since(start)
		errc <- f.inject(ctx)
	})
	s, err := f.load.Drive(ctx, d, window)
	f.ran = time.Since(start)
	if t.Stop() {
		return nil, errors.New("the load ended before the fault struck")
	}
	if ierr := <-errc; ierr != nil {
		return nil, fmt.Errorf("the fault: %w", ierr)
	}
	return s, err
}

var _ lab.Driver = (*faultDriver)(nil)
