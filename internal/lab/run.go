package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// Run is one experiment's run: its options, the sandbox its services run
// in, and the rows and environment it records.
type Run struct {
	Opts     Options
	Sandbox  *sandbox.Sandbox
	Progress *Progress

	name string
	dir  string // logs and configs of this experiment
	res  *Result
	seq  int
}

// SetEnv records a fact about the environment: a dependency's kind and
// version ("lb": "nginx 1.22.1"), a quota, a setting that ran.
func (r *Run) SetEnv(key, value string) { r.res.Env[key] = value }

// AddRow appends a measured row.
func (r *Run) AddRow(row *Row) { r.res.Rows = append(r.res.Rows, row) }

// Note records something a reader of the result should know.
func (r *Run) Note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.res.Notes = append(r.res.Notes, msg)
	r.Progress.Logf("note: %s", msg)
}

// Service is a running "hlab serve" process.
type Service struct {
	Name string
	Addr string // host:port
	Proc *sandbox.Process
}

// URL returns the service's URL for path.
func (s *Service) URL(path string) string { return "http://" + s.Addr + path }

// Stop stops the service gracefully.
func (s *Service) Stop() error { return s.Proc.Stop(5 * time.Second) }

// StartService starts "hlab serve name --addr 127.0.0.1:PORT args..." under
// the given CPU quota (fraction of a core; 0 = none) and memory limit (MB;
// 0 = none), and waits until its /healthz answers.
func (r *Run) StartService(ctx context.Context, name string, cpu float64, memMB int, args ...string) (*Service, error) {
	r.seq++
	label := fmt.Sprintf("%s-%d", name, r.seq)
	var lastErr error
	for range 3 { // a free port can be taken before the service binds it
		port, err := deps.FreePort()
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		logPath := filepath.Join(r.dir, label+".log")
		logf, err := os.Create(logPath)
		if err != nil {
			return nil, fmt.Errorf("lab: service log: %w", err)
		}
		proc, err := r.Sandbox.Start(ctx, sandbox.Spec{
			Name: label, Path: r.Opts.Self,
			Args: append([]string{"serve", name, "--addr", addr}, args...),
			CPU:  cpu, MemoryMB: memMB,
			Stdout: logf, Stderr: logf,
		})
		if err != nil {
			logf.Close()
			return nil, fmt.Errorf("lab: start %s: %w", label, err)
		}
		err = deps.AwaitHTTP(ctx, "http://"+addr+"/healthz", 15*time.Second, proc.Done())
		logf.Close()
		if err == nil {
			return &Service{Name: label, Addr: addr, Proc: proc}, nil
		}
		proc.Stop(2 * time.Second)
		lastErr = fmt.Errorf("lab: %s did not start: %w (log: %s)", label, err, logPath)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// LB is a running load balancer in front of services.
type LB struct {
	Kind string // what ran, for the environment: "nginx 1.22.1" or "builtin (embedded default)"
	Addr string
	Proc *sandbox.Process
}

// URL returns the load balancer's URL for path.
func (l *LB) URL(path string) string { return "http://" + l.Addr + path }

// Stop stops the load balancer.
func (l *LB) Stop() error { return l.Proc.Stop(5 * time.Second) }

// StartLB starts the load balancer chosen by Opts.LB, round robin over
// upstreams, outside any quota (the reports ran theirs unconstrained).
func (r *Run) StartLB(ctx context.Context, upstreams []string) (*LB, error) {
	useNginx := r.Opts.LB == LBNginx
	if r.Opts.LB == LBAuto {
		if _, _, err := deps.FindNginx(); err == nil {
			useNginx = true
		} else {
			r.Note("nginx is not installed: using the built-in load balancer (embedded default); 'make deps' installs nginx")
		}
	}
	if useNginx {
		n, err := deps.StartNginx(ctx, r.Sandbox, deps.NginxConfig{
			Upstreams: upstreams,
			Dir:       filepath.Join(r.dir, fmt.Sprintf("nginx-%d", len(upstreams))),
		})
		if err != nil {
			return nil, err
		}
		return &LB{Kind: "nginx " + n.Version, Addr: n.Addr, Proc: n.Proc}, nil
	}
	svc, err := r.StartService(ctx, "lb", 0, 0, "--upstreams", strings.Join(upstreams, ","))
	if err != nil {
		return nil, err
	}
	return &LB{Kind: "builtin (embedded default)", Addr: svc.Addr, Proc: svc.Proc}, nil
}

// Measurement is one row to measure.
type Measurement struct {
	Label string
	URL   string
	// Procs are the processes whose CPU and memory the row reports (summed):
	// the services under test, not the load balancer or the generator.
	Procs []*sandbox.Process
	Ref   *Ref
	// Load sets the model: loadgen.Connections(n) for closed, plus
	// loadgen.Rate(r) for open. Duration is set by Measure.
	Load []loadgen.Option
	// Duration of each measured run.
	Duration time.Duration
	// Repeat overrides Opts.Repeats() when > 0.
	Repeat int
	// NoWarmup skips the warm-up (the caller warmed up already).
	NoWarmup bool

	// The fields below are for targets that stall for seconds (report E's
	// slow dependency); their zero values keep the behaviour above.

	// Cut ends each run at Duration, abandoning the requests still in
	// flight instead of waiting for them: RPS is then the answers completed
	// within Duration per second of it. A closed-model run against a
	// dependency that stalls 10 s would otherwise end with seconds of
	// connections waiting for stragglers, counted as run time.
	Cut bool
	// SampleFrom and SampleTo bound, as offsets from the start of each run,
	// the window in which CPU, RSS and Metrics are sampled: the steady
	// state, without the ramp-up or the drain. Zero: from the start; to
	// the end of the run, drain included.
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
func (r *Run) Measure(ctx context.Context, m Measurement) (*Row, error) {
	n := m.Repeat
	if n <= 0 {
		n = r.Opts.Repeats()
	}
	if !m.NoWarmup {
		r.Progress.Step(m.Label+": warm-up", r.Opts.Warmup())
		if _, err := loadgen.Run(ctx, m.URL, append(m.Load, loadgen.Duration(r.Opts.Warmup()))...); err != nil {
			return nil, fmt.Errorf("lab: %s warm-up: %w", m.Label, err)
		}
	}
	var runs []runFigures
	for i := range n {
		r.Progress.Step(fmt.Sprintf("%s: run %d/%d", m.Label, i+1, n), m.Duration)
		fig, err := r.measureOnce(ctx, m)
		if err != nil {
			return nil, err
		}
		runs = append(runs, fig)
	}
	row := aggregate(m.Label, runs)
	row.Ref = m.Ref
	res := runs[0].res
	row.Model, row.Connections, row.Rate = res.Model, res.Connections, res.Rate
	return row, nil
}

func (r *Run) measureOnce(ctx context.Context, m Measurement) (runFigures, error) {
	var fig runFigures
	before, err := readCounters(ctx, m.Counters)
	if err != nil {
		return fig, fmt.Errorf("lab: %s: counters before the run: %w", m.Label, err)
	}
	win := startWindow(ctx, m)
	runCtx := ctx
	if m.Cut {
		cutCtx, cut := context.WithCancel(ctx)
		t := time.AfterFunc(m.Duration, cut)
		defer t.Stop()
		defer cut()
		runCtx = cutCtx
	}
	res, err := loadgen.Run(runCtx, m.URL, append(m.Load, loadgen.Duration(m.Duration))...)
	if !win.finish(&fig) && err == nil && ctx.Err() == nil {
		return fig, fmt.Errorf("lab: %s: the run ended before its sampling window opened at %v", m.Label, m.SampleFrom)
	}
	if err != nil {
		return fig, fmt.Errorf("lab: %s: %w", m.Label, err)
	}
	for _, p := range m.Procs {
		select {
		case <-p.Done():
			return fig, fmt.Errorf("lab: %s: %s died during the run: %v", m.Label, p.Name(), p.ExitErr())
		default:
		}
	}
	if len(m.Counters) > 0 {
		after, err := readCounters(ctx, m.Counters)
		if err != nil {
			return fig, fmt.Errorf("lab: %s: counters after the run: %w", m.Label, err)
		}
		fig.counters = map[string]float64{}
		for k, v := range after {
			fig.counters[k] = v - before[k]
		}
	}
	fig.res = res
	return fig, nil
}

// window samples the processes and metrics of a measurement between
// SampleFrom and SampleTo (or the end of the run).
type window struct {
	stop, done chan struct{}
	meters     []*sandbox.Meter
	heap       *heapSampler

	// Written by the window's goroutine before done closes.
	usage   []sandbox.Usage
	heapFig *heapFigures
	opened  bool
}

func startWindow(ctx context.Context, m Measurement) *window {
	w := &window{stop: make(chan struct{}), done: make(chan struct{})}
	begin := time.Now()
	open := func() {
		for _, p := range m.Procs {
			w.meters = append(w.meters, p.Measure())
		}
		if len(m.Metrics) > 0 {
			w.heap = startHeapSampler(m.Metrics)
		}
		w.opened = true
	}
	if m.SampleFrom <= 0 {
		open() // before the load starts, as a plain run always did
	}
	go func() {
		defer close(w.done)
		if !w.opened {
			t := time.NewTimer(m.SampleFrom)
			defer t.Stop()
			select {
			case <-t.C:
				open()
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			}
		}
		if m.SampleTo > 0 {
			t := time.NewTimer(time.Until(begin.Add(m.SampleTo)))
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
	return w
}

// finish closes the window (if still open) and adds what it sampled to
// fig; it reports whether the window opened at all.
func (w *window) finish(fig *runFigures) bool {
	close(w.stop)
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

// RunAll runs exps one after another and returns their results. An
// experiment that fails is reported in its Result and the others still run;
// a cancelled ctx stops the run.
func RunAll(ctx context.Context, exps []Experiment, opts Options, sb *sandbox.Sandbox, prog *Progress) ([]*Result, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	var results []*Result
	for _, e := range exps {
		if ctx.Err() != nil {
			break
		}
		results = append(results, runOne(ctx, e, opts, sb, prog))
	}
	if ctx.Err() != nil {
		return results, fmt.Errorf("lab: interrupted: %w", context.Cause(ctx))
	}
	return results, nil
}

func runOne(ctx context.Context, e Experiment, opts Options, sb *sandbox.Sandbox, prog *Progress) *Result {
	res := &Result{Name: e.Name(), Title: e.Title(), Env: map[string]string{}, Rows: []*Row{}, Mode: opts.Mode}
	run := &Run{Opts: opts, Sandbox: sb, Progress: prog, name: e.Name(), res: res, dir: filepath.Join(opts.WorkDir, e.Name())}
	start := time.Now()
	prog.Begin(e.Name(), e.Estimate(opts))
	err := os.MkdirAll(run.dir, 0o755)
	if err == nil {
		err = e.Run(ctx, run)
	}
	res.Seconds = time.Since(start).Seconds()
	Judge(res, e.Claims())
	summary := verdictWord(res)
	if res.Ratio != nil {
		summary += fmt.Sprintf(" (ratio %.2f)", *res.Ratio)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		}
		res.Error = err.Error()
		summary = "FAILED: " + res.Error
	}
	prog.End(summary)
	return res
}

// verdictWord is what the lab prints for a result's claims.
func verdictWord(res *Result) string {
	if res.Reproduced {
		return "REPRODUCED"
	}
	return "NOT REPRODUCED"
}

// Verdict is the word printed for res: REPRODUCED, NOT REPRODUCED or FAILED.
func Verdict(res *Result) string {
	if res.Error != "" {
		return "FAILED"
	}
	return verdictWord(res)
}
