package replicaexp

import (
	"context"
	"runtime"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// setup is one closed-model row.
type setup struct {
	label    string
	svc      *lab.Service
	path     string
	conns    int
	ref      *lab.Ref
	counters []lab.Counter // summed over the runs into Row.Figures
}

func (b *bench) measurement(s setup, d time.Duration) lab.Measurement {
	return lab.Measurement{
		Label: s.label, URL: s.svc.URL(s.path), Procs: []*sandbox.Process{s.svc.Proc}, Ref: s.ref,
		Duration: d, Load: []loadgen.Option{loadgen.Connections(s.conns)}, Counters: s.counters,
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

// set puts each row's average cores in its Figures: postgres_cpu,
// loadgen_cpu and machine_cpu, to tell whether a row was bound by its
// service or by the machine (on 2 cores, a service at 1 CPU, Postgres and
// the load generator can need more than there is).
func (c *cores) set(row *lab.Row) {
	if row.Figures == nil {
		row.Figures = map[string]float64{}
	}
	if c.runs == 0 {
		return
	}
	n := float64(c.runs)
	row.Figures["postgres_cpu"] = c.postgres / n
	row.Figures["loadgen_cpu"] = c.loadgen / n
	row.Figures["machine_cpu"] = c.machine / n
}

// paired measures setups in rounds (lab.MeasurePaired: the claims over
// them decide how many), with the cores each used.
func (b *bench) paired(ctx context.Context, setups []setup) ([]*lab.Row, error) {
	ms := make([]lab.Measurement, len(setups))
	for i, s := range setups {
		ms[i] = b.measurement(s, b.t.run)
	}
	cs := make([]cores, len(setups))
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms, Around: func(i int, run func() error) error {
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
func (b *bench) single(ctx context.Context, s setup, d time.Duration, warm bool) (*lab.Row, error) {
	var c cores
	m := b.measurement(s, d)
	m.NoWarmup = !warm
	var row *lab.Row
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

func fig(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}
