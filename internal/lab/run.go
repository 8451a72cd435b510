package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/grpcfloor"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/lb"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// Run is one experiment's run: its options, the sandbox its services run
// in, and the rows and environment it records.
type Run struct {
	Opts     Options
	Sandbox  *sandbox.Sandbox
	Progress *Progress

	spec Spec
	dir  string // logs and configs of this experiment
	res  *labresult.Result
	seq  int
	errs []error // rows and figures the Spec does not declare

	mu       sync.Mutex
	warmRate map[labresult.Key]float64 // successful requests/s at the end of the row's warm-up
	warmNote map[labresult.Key]string  // what a Steady warm-up found
	pinned   bool                      // processes run on cores of their own (place)
	placed   string                    // how the last measurement's processes were placed
	stops    []func()                  // Cleanup's, run when Run returns

	// On external servers (Options.External): what the run's objects are
	// named with, the servers' env entries, and the cleanups to run.
	prefix   string
	extEnv   map[string]string
	cleanups []func() error
}

// SetEnv records a fact about the environment: a dependency's kind and
// version ("lb": "nginx 1.22.1"), a quota, a setting that ran.
func (r *Run) SetEnv(key, value string) { r.res.Env[key] = value }

// AddRow appends a measured row, its label and the report's figures
// taken from the row its Spec declares under the same key. A row whose
// key, or a figure of which, the Spec does not declare fails the
// experiment when it ends: the run must be what the Spec says.
func (r *Run) AddRow(row *labresult.Row) {
	spec := r.spec.row(row.Key)
	if spec == nil {
		r.errs = append(r.errs, fmt.Errorf("lab: a row has key %q, which the experiment's Spec does not declare", row.Key))
		row.Label = string(row.Key)
	} else {
		row.Label, row.Ref = spec.Label, spec.Ref
	}
	for name := range row.Figures {
		if !r.spec.known(name) {
			r.errs = append(r.errs, fmt.Errorf("lab: row %q carries figure %q, which the experiment's Spec does not declare (Spec.Metrics)", row.Key, name))
		}
	}
	r.res.Rows = append(r.res.Rows, row)
}

// UsedInFirstClaim records that rows of the first claim run with value for
// the setup item: the config text, schema or setting the experiment
// really passes, where it passes it. A value that is not the one the Spec
// declares as ours for a FirstClaim item fails the experiment, so the
// declared setup cannot drift from what runs.
func (r *Run) UsedInFirstClaim(item, value string) {
	e := r.spec.setup(item)
	switch {
	case e == nil || !e.FirstClaim:
		r.errs = append(r.errs, fmt.Errorf("lab: the first claim's rows run with setup item %q, which the experiment's Spec does not declare as a first-claim item (Spec.Setup)", item))
	case labresult.SetupText(value) != labresult.SetupText(e.Ours):
		r.errs = append(r.errs, fmt.Errorf("lab: the first claim's rows run with %s %q, but the Spec declares ours as %q: run what the Spec declares, or declare the difference from the report's (Spec.Setup)", item, value, e.Ours))
	}
}

// NewRow returns a row the experiment fills itself (a fault row, an
// average of rows), not one a driver measured; add it with AddRow.
func NewRow(key labresult.Key) *labresult.Row {
	return &labresult.Row{Key: key, Errors: map[string]int64{}, StatusCodes: map[string]int64{}}
}

// Label is the label the Spec declares for key: for progress lines and
// prose that names a row.
func (r *Run) Label(key labresult.Key) string {
	if s := r.spec.row(key); s != nil {
		return s.Label
	}
	return string(key)
}

// Cleanup registers f to run once the experiment's Run has returned, also
// after an error, last registered first, and before the run's objects on
// external servers are dropped: what an experiment starts (services,
// databases, sessions) is stopped there, whichever phase failed, without
// a stack of defers in Run. Safe for concurrent use.
func (r *Run) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops = append(r.stops, f)
}

// runCleanups runs what Cleanup registered, last first.
func (r *Run) runCleanups() {
	r.mu.Lock()
	stops := r.stops
	r.stops = nil
	r.mu.Unlock()
	for _, f := range slices.Backward(stops) {
		f()
	}
}

// Note records something a reader of the result should know.
func (r *Run) Note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.res.Notes = append(r.res.Notes, msg)
	r.Progress.Logf("note: %s", msg)
}

// Service is a running "hlab serve" process.
type Service struct {
	Name string
	Addr string // host:port of its HTTP server (--addr)
	Proc *sandbox.Process
	// Ports are the addresses given to the service's other port flags
	// (StartServicePorts), by flag: "--grpc-addr" -> "127.0.0.1:PORT".
	Ports map[string]string

	run  *Run
	spec sandbox.Spec // what started it, for Restart
}

// URL returns the service's URL for path.
func (s *Service) URL(path string) string { return "http://" + s.Addr + path }

// Stop stops the service gracefully.
func (s *Service) Stop() error { return s.Proc.Stop(5 * time.Second) }

// StartService starts "hlab serve name --addr 127.0.0.1:PORT args..." under
// the given CPU quota (fraction of a core; 0 = none) and memory limit (MB;
// 0 = none), and waits until its /healthz answers.
func (r *Run) StartService(ctx context.Context, name string, cpu float64, memMB int, args ...string) (*Service, error) {
	return r.StartServicePorts(ctx, name, cpu, memMB, nil, args...)
}

// StartServicePorts is StartService for a service that listens on more
// ports than --addr: each flag of portFlags ("--grpc-addr") gets a free
// 127.0.0.1 port too (Service.Ports). It is the one place the lab starts
// a service on free ports: through deps.OnFreePorts, which starts again
// on new ports (three sets at most) when the service could not bind one.
func (r *Run) StartServicePorts(ctx context.Context, name string, cpu float64, memMB int, portFlags []string, args ...string) (*Service, error) {
	return r.startService(ctx, name, cpu, memMB, portFlags, cliflag.Command{Args: args})
}

// StartCommand is StartService for a service whose Config holds secrets
// (a DSN with a password): cmd's Args go to its command line, which every
// local user can read, and its Env, the secrets, to its environment,
// which only its user and root can.
func (r *Run) StartCommand(ctx context.Context, name string, cpu float64, memMB int, cmd cliflag.Command) (*Service, error) {
	return r.startService(ctx, name, cpu, memMB, nil, cmd)
}

func (r *Run) startService(ctx context.Context, name string, cpu float64, memMB int, portFlags []string, cmd cliflag.Command) (*Service, error) {
	r.seq++
	label := fmt.Sprintf("%s-%d", name, r.seq)
	flags := append([]string{"--addr"}, portFlags...)
	var svc *Service
	err := deps.OnFreePorts(ctx, len(flags), func(ports []int) error {
		addrs := map[string]string{}
		argv := []string{"serve", name}
		for i, flag := range flags {
			addrs[flag] = fmt.Sprintf("127.0.0.1:%d", ports[i])
			argv = append(argv, flag, addrs[flag])
		}
		spec := sandbox.Spec{
			Name: label, Path: r.Opts.Self,
			Args: append(argv, cmd.Args...),
			CPU:  cpu, MemoryMB: memMB,
		}
		if len(cmd.Env) > 0 {
			spec.Env = append(os.Environ(), cmd.Env...)
		}
		s := &Service{Name: label, Addr: addrs["--addr"], Ports: addrs, run: r, spec: spec}
		if err := s.start(ctx, filepath.Join(r.dir, label+".log"), os.O_TRUNC); err != nil {
			return err
		}
		delete(addrs, "--addr")
		svc = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return svc, nil
}

// start starts s's process from its spec, its output going to logPath
// (truncated or appended to, by flag), and waits until /healthz answers.
// A service that could not bind an address says so in its log ("bind:
// address already in use"): the error then wraps deps.ErrPortTaken.
func (s *Service) start(ctx context.Context, logPath string, flag int) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|flag, 0o644)
	if err != nil {
		return fmt.Errorf("lab: service log: %w", err)
	}
	defer logf.Close()
	spec := s.spec
	spec.Stdout, spec.Stderr = logf, logf
	proc, err := s.run.Sandbox.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("lab: start %s: %w", s.Name, err)
	}
	if err := deps.AwaitHTTP(ctx, "http://"+s.Addr+"/healthz", 15*time.Second, proc.Done()); err != nil {
		proc.Stop(2 * time.Second)
		if b, _ := os.ReadFile(logPath); deps.PortTaken(errors.New(string(b))) {
			err = fmt.Errorf("%w: %w", deps.ErrPortTaken, err)
		}
		return fmt.Errorf("lab: %s did not start: %w (log: %s)", s.Name, err, logPath)
	}
	s.Proc = proc
	return nil
}

// Kill kills the service with SIGKILL, as a crash would.
func (s *Service) Kill() error { return s.Proc.Kill() }

// Restart starts the service again with the same command line, on the
// same addresses (after Kill, or after it died), and waits until it
// answers; its log goes on in the same file.
func (s *Service) Restart(ctx context.Context) error {
	s.Proc.Stop(time.Second)
	return s.start(ctx, filepath.Join(s.run.dir, s.Name+".log"), os.O_APPEND)
}

// Gateway is a running databus gateway (hlab serve databus), or its
// floor (hlab serve grpcfloor), which serves the same API.
type Gateway struct {
	*Service
	GRPC string // its gRPC address, host:port
}

// StartGateway starts the databus gateway that o configures (its Brokers,
// or Echo) under the given quota (0: none). Its gRPC address is the lab's
// to choose: o.GRPCAddr is ignored.
func (r *Run) StartGateway(ctx context.Context, cpu float64, memMB int, o gateway.Options) (*Gateway, error) {
	o.GRPCAddr = ""
	return r.startGRPC(ctx, "databus", cpu, memMB, o.Args())
}

// StartGRPCFloor starts the gateway's floor that c configures (hlab serve
// grpcfloor: the databus API as a bare grpc-go server with the gateway's
// transport settings) under the given quota, as StartGateway starts a
// gateway, so that the two can be measured on the same terms. Its gRPC
// address is the lab's to choose: c.GRPCAddr is ignored.
func (r *Run) StartGRPCFloor(ctx context.Context, cpu float64, memMB int, c grpcfloor.Config) (*Gateway, error) {
	c.GRPCAddr = ""
	return r.startGRPC(ctx, "grpcfloor", cpu, memMB, c.Args())
}

// startGRPC starts "hlab serve name args..." with a gRPC address of the
// lab's choosing (--grpc-addr) beside its HTTP one.
func (r *Run) startGRPC(ctx context.Context, name string, cpu float64, memMB int, args []string) (*Gateway, error) {
	svc, err := r.StartServicePorts(ctx, name, cpu, memMB, []string{"--grpc-addr"}, args...)
	if err != nil {
		return nil, err
	}
	return &Gateway{Service: svc, GRPC: svc.Ports["--grpc-addr"]}, nil
}

// LB is a running load balancer in front of services.
type LB struct {
	Kind string // what ran, for the environment: "nginx 1.22.1" or "builtin (embedded default)"
	Addr string
	Proc *sandbox.Process
	// Config is how it balances, as it runs: nginx's site config
	// (conf.d/default.conf) with the upstreams' addresses written <app1>,
	// <app2>, ... and its own <lb>, or the built-in balancer's settings.
	// Frame is nginx's nginx.conf around it, its prefix written <prefix>;
	// empty for the built-in balancer.
	Config, Frame string

	restart func(ctx context.Context) (*sandbox.Process, error)
}

// URL returns the load balancer's URL for path.
func (l *LB) URL(path string) string { return "http://" + l.Addr + path }

// Stop stops the load balancer.
func (l *LB) Stop() error { return l.Proc.Stop(5 * time.Second) }

// Kill kills the load balancer with SIGKILL (its workers too), as a crash would.
func (l *LB) Kill() error { return l.Proc.Kill() }

// Restart starts the load balancer again on the same address with the
// same config (after Kill), and waits until it answers.
func (l *LB) Restart(ctx context.Context) error {
	l.Proc.Stop(time.Second)
	proc, err := l.restart(ctx)
	if err != nil {
		return err
	}
	l.Proc = proc
	return nil
}

// UsesNginx reports whether the load balancer o picks is nginx: asked
// for, or installed when o leaves it to the lab.
func (o Options) UsesNginx() bool {
	switch o.LB {
	case LBNginx:
		return true
	case LBAuto, "":
		_, _, err := deps.FindNginx()
		return err == nil
	}
	return false
}

// StartLB starts the load balancer chosen by Opts.LB, round robin over
// upstreams, outside any quota (the reports ran theirs unconstrained),
// with nginx's defaults: a new upstream connection per request. With
// keepalive > 0 it keeps that many idle connections to the upstreams
// (nginx's upstream keepalive over HTTP/1.1; the built-in balancer's
// idle connections per upstream).
func (r *Run) StartLB(ctx context.Context, upstreams []string, keepalive int) (*LB, error) {
	if !r.Opts.UsesNginx() {
		const why = "nginx is not installed: using the built-in load balancer (embedded default); 'make deps' installs nginx"
		if r.Opts.LB != LBBuiltin && !slices.Contains(r.res.Notes, why) {
			r.Note(why)
		}
		return r.StartBuiltinLB(ctx, upstreams, keepalive)
	}
	r.seq++
	// Absolute, as nginx is given it: its configs name it so.
	dir, err := filepath.Abs(filepath.Join(r.dir, fmt.Sprintf("nginx-%d", r.seq)))
	if err != nil {
		return nil, fmt.Errorf("lab: nginx prefix: %w", err)
	}
	cfg := deps.NginxConfig{Upstreams: upstreams, UpstreamKeepalive: keepalive, Dir: dir}
	n, err := deps.StartNginx(ctx, r.Sandbox, cfg)
	if err != nil {
		return nil, err
	}
	// Started again, it listens where clients know to find it.
	_, port, _ := net.SplitHostPort(n.Addr)
	cfg.Port, _ = strconv.Atoi(port)
	return &LB{Kind: "nginx " + n.Version, Addr: n.Addr, Proc: n.Proc,
		Config: nginxNamed(n.Site, upstreams, n.Addr, cfg.Dir), Frame: nginxNamed(n.Main, upstreams, n.Addr, cfg.Dir),
		restart: func(ctx context.Context) (*sandbox.Process, error) {
			n, err := deps.StartNginx(ctx, r.Sandbox, cfg)
			if err != nil {
				return nil, err
			}
			return n.Proc, nil
		}}, nil
}

// StartBuiltinLB is StartLB for the built-in balancer (hlab serve lb),
// whatever Opts.LB says: for rows about the built-in balancer itself.
func (r *Run) StartBuiltinLB(ctx context.Context, upstreams []string, keepalive int) (*LB, error) {
	cfg := lb.Config{Upstreams: upstreams, IdleConnsPerUpstream: keepalive}
	svc, err := r.StartService(ctx, "lb", 0, 0, cfg.Args()...)
	if err != nil {
		return nil, err
	}
	return &LB{Kind: "builtin (embedded default)", Addr: svc.Addr, Proc: svc.Proc, Config: cfg.String(),
		restart: func(ctx context.Context) (*sandbox.Process, error) {
			if err := svc.Restart(ctx); err != nil {
				return nil, err
			}
			return svc.Proc, nil
		}}, nil
}

// nginxNamed is an nginx config as it ran, with its addresses and prefix
// written by name: the upstreams <app1>, <app2>, ..., its own listen
// address <lb>, its prefix directory <prefix>. What runs can then be set
// beside a declared config whatever ports this run got.
func nginxNamed(conf string, upstreams []string, addr, dir string) string {
	for i, u := range upstreams {
		conf = strings.ReplaceAll(conf, "server "+u+";", fmt.Sprintf("server <app%d>;", i+1))
	}
	conf = strings.ReplaceAll(conf, "listen "+addr+";", "listen <lb>;")
	return strings.ReplaceAll(conf, dir, "<prefix>")
}

// RunAll runs exps one after another and returns their results. An
// experiment that fails is reported in its Result and the others still run;
// a cancelled ctx stops the run.
func RunAll(ctx context.Context, exps []Experiment, opts Options, sb *sandbox.Sandbox, prog *Progress) ([]*labresult.Result, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	var results []*labresult.Result
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

func runOne(ctx context.Context, e Experiment, opts Options, sb *sandbox.Sandbox, prog *Progress) *labresult.Result {
	spec := e.Spec(opts)
	res := &labresult.Result{Name: spec.Name, Title: spec.Title, Env: map[string]string{}, Rows: []*labresult.Row{}, Mode: string(opts.Mode)}
	run := &Run{Opts: opts, Sandbox: sb, Progress: prog, spec: spec, res: res, dir: filepath.Join(opts.WorkDir, spec.Name),
		warmRate: map[labresult.Key]float64{}, warmNote: map[labresult.Key]string{},
		prefix: newPrefix(spec.Name), extEnv: map[string]string{}}
	start := time.Now()
	loadStart := loadAverage()
	prog.Begin(spec.Name, e.Estimate(opts))
	err := spec.Validate()
	if err == nil {
		err = os.MkdirAll(run.dir, 0o755)
	}
	if err == nil {
		err = func() error {
			defer run.runCleanups()
			return e.Run(ctx, run)
		}()
	}
	run.finishExternal()
	if run.pinned { // the next experiment places its own processes
		sandbox.SetCPUs(os.Getpid(), nil)
	}
	res.Seconds = time.Since(start).Seconds()
	// Other processes on the machine skew every figure: say how busy it was.
	res.Env["load_average"] = fmt.Sprintf("%s at the start, %s at the end (1 min; %d CPUs)", loadText(loadStart), loadText(loadAverage()), runtime.NumCPU())
	if err == nil {
		err = errors.Join(run.errs...)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		}
		res.Error = err.Error()
	}
	for _, f := range spec.Figures {
		if f.Rerun == "" {
			res.NotRerun = append(res.NotRerun, labresult.NotRerun{Figure: f.Figure, Why: f.Why})
		}
	}
	res.Setup = spec.Setup
	res.Rows = inSpecOrder(spec, res.Rows)
	res.Metrics = carried(spec.Metrics, res.Rows)
	labresult.Judge(res, spec.Claims, spec.Targets)
	summary := labresult.Summary(res)
	if res.Error != "" {
		summary = "FAILED: " + res.Error + "; " + summary
	}
	prog.End(summary)
	return res
}

// inSpecOrder orders rows as the Spec declares them, whatever order the
// phases measured them in: the table reads as the Spec is written. Rows
// the Spec does not declare (an error already) go last.
func inSpecOrder(spec Spec, rows []*labresult.Row) []*labresult.Row {
	at := map[labresult.Key]int{}
	for i, r := range spec.Rows {
		at[r.Key] = i
	}
	pos := func(r *labresult.Row) int {
		if i, ok := at[r.Key]; ok {
			return i
		}
		return len(spec.Rows)
	}
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b *labresult.Row) int { return pos(a) - pos(b) })
	return out
}

// carried returns the metrics some row carries, in declaration order.
func carried(metrics []labresult.Metric, rows []*labresult.Row) []labresult.Metric {
	var out []labresult.Metric
	for _, m := range metrics {
		if slices.ContainsFunc(rows, func(r *labresult.Row) bool { _, ok := r.Figures[m.Name]; return ok }) {
			out = append(out, m)
		}
	}
	return out
}

func loadText(v *float64) string {
	if v == nil {
		return "?"
	}
	return fmt.Sprintf("%.2f", *v)
}
