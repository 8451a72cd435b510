package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// ErrServiceDied is returned (wrapped) by the measuring methods when a
// process of the row died during a run; the row is added to the result
// with Row.Died set, so that the claims using it are INVALID.
var ErrServiceDied = errors.New("lab: a service died during the run")

// Measurement is one row to measure: the row its Spec declares as Key.
type Measurement struct {
	Key labresult.Key
	// Driver puts the load: HTTP{URL, Load} for hlab's load generator, or
	// a driver of the experiment's own.
	Driver Driver
	// Procs are the processes whose CPU and memory the row reports (summed):
	// the services under test, not the load balancer or the generator.
	Procs []*sandbox.Process
	// Duration of each measured run; the runner stretches it to
	// Options.MinRun and, from the warm-up's rate, to MinRequests.
	Duration time.Duration
	// Repeat overrides Opts.Repeats() when > 0 (Measure only).
	Repeat int
	// NoWarmup skips the warm-up (the caller warmed up already, or the
	// row must start cold).
	NoWarmup bool
	// Steady warms up until throughput stops climbing (a JVM compiling
	// its hot paths), not for the fixed Options.Warmup: see WarmUp.
	Steady bool
	// MinSuccess is the share of requests the row must answer
	// successfully for a claim to use it (default DefaultSuccessBound):
	// set lower, with the reason in the row's note, for a baseline that
	// fails by design, or to labresult.FailsByDesign for a row none of
	// whose requests can succeed.
	MinSuccess float64

	// SampleFrom and SampleTo bound, as offsets from the start of the
	// measured load, the window in which CPU, RSS and Metrics are
	// sampled: the steady state, without the ramp-up or the drain. Zero:
	// from the start; to the end of the load, drain included.
	SampleFrom, SampleTo time.Duration
	// Metrics are the /metrics URLs of Go services whose heap
	// (go_memstats_heap_alloc_bytes) and goroutines are sampled every
	// 100 ms in the window, summed over services: Row.HeapMB*, Row.Goroutines*.
	Metrics []string
	// Counters are read before and after each run (drain included); their
	// increase, summed over runs, goes to Row.Figures.
	Counters []Counter
}

// Measure warms up, then runs the load Repeat times, sampling Procs, and
// returns the row: medians with the spread of RPS.
func (r *Run) Measure(ctx context.Context, m Measurement) (*labresult.Row, error) {
	n := m.Repeat
	defaults.Positive(&n, r.Opts.Repeats())
	d, err := r.prepare(ctx, &m)
	if err != nil {
		return nil, err
	}
	r.place()
	var runs []runFigures
	for i := range n {
		r.Progress.Step(fmt.Sprintf("%s: run %d/%d", r.Label(m.Key), i+1, n), d)
		fig, err := r.measureOnce(ctx, m, d)
		if err != nil {
			return nil, r.failed(m, runs, err)
		}
		runs = append(runs, fig)
	}
	return r.finishRow(m, runs), nil
}

// prepare warms m up (unless NoWarmup or warmed already) and returns the
// duration of its runs: Duration, at least Options.MinRun, and long
// enough for MinRequests at the warm-up's rate.
func (r *Run) prepare(ctx context.Context, m *Measurement) (time.Duration, error) {
	if m.Driver == nil {
		return 0, fmt.Errorf("lab: row %q has no Driver: give it lab.HTTP{URL, Load} or a driver of the experiment's own", m.Key)
	}
	r.mu.Lock()
	rate, warmed := r.warmRate[m.Key]
	r.mu.Unlock()
	if !warmed && !m.NoWarmup {
		var err error
		if rate, err = r.warmOne(ctx, *m); err != nil {
			return 0, err
		}
	}
	minRun, minReqs := r.Opts.MinRun()
	if r.Opts.Short { // wiring, not figures: every run as short as its window allows
		return max(minRun, m.SampleTo), nil
	}
	d := max(m.Duration, minRun)
	if rate > 0 {
		need := time.Duration(float64(minReqs) / rate * 1.2 * float64(time.Second))
		d = max(d, need.Round(time.Second))
	}
	return d, nil
}

// finishRow aggregates runs into m's row with what the runner knows of it.
func (r *Run) finishRow(m Measurement, runs []runFigures) *labresult.Row {
	row := aggregate(m.Key, runs)
	if spec := r.spec.row(m.Key); spec != nil {
		row.Label, row.Ref = spec.Label, spec.Ref
	}
	row.SuccessBound = labresult.DefaultSuccessBound
	if m.MinSuccess != 0 {
		row.SuccessBound = m.MinSuccess
	}
	row.QuotaMissing = quotaMissing(m.Procs)
	r.mu.Lock()
	row.Placement = r.placed
	r.mu.Unlock()
	_, minReqs := r.Opts.MinRun()
	for _, f := range runs {
		if f.sample.Requests < minReqs {
			row.AddNote("a run had only %d requests (fewer than %d: its figures are coarse)", f.sample.Requests, minReqs)
			break
		}
	}
	r.mu.Lock()
	if w, ok := r.warmNote[m.Key]; ok {
		row.AddNote("%s", w)
	}
	r.mu.Unlock()
	return row
}

// failed handles a run that failed: when a process of the row died, the
// row (from the runs so far) joins the result marked with it, so that
// the claims using it are INVALID, and the error wraps ErrServiceDied.
func (r *Run) failed(m Measurement, runs []runFigures, err error) error {
	var died *diedError
	if !errors.As(err, &died) {
		return err
	}
	row := r.finishRow(m, runs)
	row.Died = died.what
	r.AddRow(row)
	return err
}

type diedError struct{ label, what string }

func (e *diedError) Error() string {
	return fmt.Sprintf("lab: %s: %s died during the run", e.label, e.what)
}
func (e *diedError) Unwrap() error { return ErrServiceDied }

// quotaMissing names the processes that asked for a CPU quota the
// sandbox could not enforce.
func quotaMissing(procs []*sandbox.Process) string {
	var out []string
	for _, p := range procs {
		if cores, enforced := p.CPUQuota(); cores > 0 && !enforced {
			out = append(out, fmt.Sprintf("%s asked for %g CPU", p.Name(), cores))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, ", ") + " (no quota mechanism on this machine)"
}

func (r *Run) measureOnce(ctx context.Context, m Measurement, d time.Duration) (runFigures, error) {
	var fig runFigures
	before, err := readCounters(ctx, m.Counters)
	if err != nil {
		return fig, fmt.Errorf("lab: %s: counters before the run: %w", r.Label(m.Key), err)
	}
	noise := probeNoise(r.Sandbox)
	win := newWindow(ctx, m)
	sample, err := m.Driver.Drive(ctx, d, win.callback)
	if !win.finish(&fig) && err == nil && ctx.Err() == nil {
		return fig, fmt.Errorf("lab: %s: the run ended before its sampling window opened at %v", r.Label(m.Key), m.SampleFrom)
	}
	for _, p := range m.Procs {
		select {
		case <-p.Done():
			return fig, &diedError{label: r.Label(m.Key), what: fmt.Sprintf("%s (%v)", p.Name(), p.ExitErr())}
		default:
		}
	}
	if err != nil {
		return fig, fmt.Errorf("lab: %s: %w", r.Label(m.Key), err)
	}
	if len(m.Counters) > 0 {
		after, err := readCounters(ctx, m.Counters)
		if err != nil {
			return fig, fmt.Errorf("lab: %s: counters after the run: %w", r.Label(m.Key), err)
		}
		fig.counters = map[string]float64{}
		for k, v := range after {
			fig.counters[k] = v - before[k]
		}
	}
	if out, ok := probeNoise(r.Sandbox).outsideSince(noise); ok {
		fig.outside = out
	}
	fig.loadAvg = loadAverage()
	fig.sample = sample
	return fig, nil
}

// window samples the processes and metrics of a measurement between
// SampleFrom and SampleTo after the driver opened it (or its end).
type window struct {
	ctx  context.Context
	m    Measurement
	once sync.Once
	stop chan struct{}
	done chan struct{}

	started bool // set by the driver's goroutine before it is read by finish

	// Written by the window's goroutine before done closes.
	meters  []*sandbox.Meter
	heap    *heapSampler
	usage   []sandbox.Usage
	heapFig *heapFigures
	opened  bool
}

func newWindow(ctx context.Context, m Measurement) *window {
	return &window{ctx: ctx, m: m, stop: make(chan struct{}), done: make(chan struct{})}
}

// callback is the driver's window function.
func (w *window) callback(open bool) {
	if !open {
		w.once.Do(func() { close(w.stop) })
		return
	}
	if w.started {
		return
	}
	w.started = true
	begin := time.Now()
	openNow := func() {
		for _, p := range w.m.Procs {
			w.meters = append(w.meters, p.Measure())
		}
		if len(w.m.Metrics) > 0 {
			w.heap = startHeapSampler(w.m.Metrics)
		}
		w.opened = true
	}
	if w.m.SampleFrom <= 0 {
		openNow() // before the load starts
	}
	go func() {
		defer close(w.done)
		if !w.opened {
			t := time.NewTimer(w.m.SampleFrom)
			defer t.Stop()
			select {
			case <-t.C:
				openNow()
			case <-w.stop:
				return
			case <-w.ctx.Done():
				return
			}
		}
		if w.m.SampleTo > 0 {
			t := time.NewTimer(time.Until(begin.Add(w.m.SampleTo)))
			defer t.Stop()
			select {
			case <-t.C:
			case <-w.stop:
			}
		} else {
			<-w.stop
		}
		for _, mt := range w.meters {
			w.usage = append(w.usage, mt.Stop())
		}
		if w.heap != nil {
			f := w.heap.Stop()
			w.heapFig = &f
		}
	}()
}

// finish closes the window (if still open) and adds what it sampled to
// fig; it reports whether the window opened at all.
func (w *window) finish(fig *runFigures) bool {
	w.once.Do(func() { close(w.stop) })
	if !w.started {
		return false
	}
	<-w.done
	for _, u := range w.usage {
		fig.cpu += u.CPUAvg
		fig.rss += u.RSSMBAvg
		fig.rssMx += u.RSSMBMax
		fig.thr += u.Throttled
	}
	if w.heapFig != nil && w.heapFig.samples > 0 {
		fig.heap = w.heapFig
	}
	return w.opened
}
