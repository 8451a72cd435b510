package replicaexp

import (
	"context"
	"runtime"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// setup is one row's load: closed-model connections, or with a rate the
// open model (conns then caps the requests in flight).
type setup struct {
	key      labresult.Key
	svc      *lab.Service
	path     string
	conns    int
	rate     float64       // requests per second; 0: the closed model
	counters []lab.Counter // summed over the runs into Row.Figures
	// steady warms the row up until its throughput stops climbing
	// (lab.Measurement.Steady), not for the lab's fixed second.
	steady bool
}

func (b *bench) measurement(s setup, d time.Duration) lab.Measurement {
	load := []loadgen.Option{loadgen.Connections(s.conns)}
	if s.rate > 0 {
		load = append(load, loadgen.Rate(s.rate))
	}
	return lab.Measurement{
		Key: s.key, Procs: []*sandbox.Process{s.svc.Proc}, Duration: d, Counters: s.counters, Steady: s.steady,
		Driver: lab.HTTP{URL: s.svc.URL(s.path), Load: load},
	}
}

// cores are, per row, the cores Postgres, the lab process (the load
// generator) and the whole machine used, summed over its runs.
type cores struct {
	postgres, loadgen, machine float64
	runs                       int
}

// around measures cores for the run it wraps.
func (b *bench) around(c *cores, run func() error) error {
	meter, clock := b.pg.Proc().Measure(), readCPUClock()
	err := run()
	pg := meter.Stop()
	machine, self := readCPUClock().since(clock, runtime.NumCPU())
	c.postgres += pg.CPUAvg
	c.loadgen += self
	c.machine += machine
	c.runs++
	return err
}

// set puts each row's average cores in its figures: postgres_cpu,
// loadgen_cpu and machine_cpu, to tell whether a row was bound by its
// service or by the machine (on 2 cores, a service at 1 CPU, Postgres and
// the load generator can need more than there is).
func (c *cores) set(row *labresult.Row) {
	if c.runs == 0 {
		return
	}
	n := float64(c.runs)
	row.Set(postgresCores, c.postgres/n)
	row.Set(loadgenCores, c.loadgen/n)
	row.Set(machineCores, c.machine/n)
}

// paired measures setups in rounds (lab.MeasurePaired: at least
// minRounds, 0 for the lab's least; the claims over them decide how many
// more), with the cores each used.
func (b *bench) paired(ctx context.Context, minRounds int, setups []setup) ([]*labresult.Row, error) {
	ms := make([]lab.Measurement, len(setups))
	for i, s := range setups {
		ms[i] = b.measurement(s, b.t.run)
	}
	// Warmed here, the steady ones at once (lab.Run.WarmUp), rather than
	// one after another as MeasurePaired would.
	if err := b.run.WarmUp(ctx, ms...); err != nil {
		return nil, err
	}
	cs := make([]cores, len(setups))
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms, MinRounds: minRounds, Around: func(i int, run func() error) error {
		return b.around(&cs[i], run)
	}})
	if err != nil {
		return nil, err
	}
	for i, row := range rows {
		cs[i].set(row)
	}
	return rows, nil
}

// single measures one setup (Options.Repeats runs), with the cores it used.
func (b *bench) single(ctx context.Context, s setup, d time.Duration, warm bool) (*labresult.Row, error) {
	var c cores
	m := b.measurement(s, d)
	m.NoWarmup = !warm
	var row *labresult.Row
	err := b.around(&c, func() error {
		var err error
		row, err = b.run.Measure(ctx, m)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.set(row)
	return row, nil
}
