package checker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// Fault is one fault the checker injected (Config.KillEvery).
type Fault struct {
	// AtS is when it was injected, in seconds since publishing began.
	AtS float64 `json:"at_s"`
	// Kind is "sigkill" (the gateway of Config.GatewayCmd was killed and
	// started again), "command" (Config.FaultCmd ran), "injected"
	// (Config.Inject ran) or "member" (a member's connection was reset,
	// Config.DropMember).
	Kind string `json:"kind"`
	// PID is the process group killed (sigkill).
	PID int `json:"pid,omitempty"`
	// DownS is how long the gateway took from the kill to accepting
	// connections again (sigkill), or how long Inject took (injected).
	DownS float64 `json:"down_s,omitempty"`
	// Held is how many messages the dropped member held unacked (member).
	Held int `json:"held,omitempty"`
	// Output is the command's output, shortened (command).
	Output string `json:"output,omitempty"`
	// Error says why the fault was not injected, or why the gateway did
	// not come back; empty when all went as asked.
	Error string `json:"error,omitempty"`
}

const (
	faultSigkill  = "sigkill"
	faultCommand  = "command"
	faultInjected = "injected"
	faultMember   = "member"
)

// faultWhat names a kind's faults, plural, for the summary.
var faultWhat = map[string]string{
	faultSigkill:  "SIGKILLs of the gateway",
	faultCommand:  "--fault-cmd runs",
	faultInjected: "injected faults",
	faultMember:   "members dropped (connection reset, batch unacked)",
}

// gatewayProc is the gateway the checker runs itself (Config.GatewayCmd):
// the command line through sh -c, in a process group of its own, killed
// if the checker dies (see package sandbox).
type gatewayProc struct {
	cfg *Config
	sb  *sandbox.Sandbox
	p   *sandbox.Process
}

// startGateway starts cfg.GatewayCmd and returns once cfg.Target accepts
// connections.
func startGateway(ctx context.Context, cfg *Config) (*gatewayProc, error) {
	if c, err := net.DialTimeout("tcp", cfg.Target, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%w: something already listens on %s, where the gateway of --gateway-cmd is to serve: stop it, or give --target and --gateway-cmd another address", ErrConfig, cfg.Target)
	}
	g := &gatewayProc{cfg: cfg, sb: sandbox.Unlimited("the checker's gateway runs without limits")}
	if err := g.start(ctx); err != nil {
		g.sb.Close()
		return nil, err
	}
	return g, nil
}

func (g *gatewayProc) start(ctx context.Context) error {
	p, err := g.sb.Start(context.WithoutCancel(ctx), sandbox.Spec{
		Name: "gateway", Path: "/bin/sh", Args: []string{"-c", g.cfg.GatewayCmd},
		Stdout: g.cfg.GatewayLog, Stderr: g.cfg.GatewayLog,
	})
	if err != nil {
		return fmt.Errorf("checker: start the gateway (%s): %w", g.cfg.GatewayCmd, err)
	}
	g.p = p
	if err := awaitListening(ctx, g.cfg.Target, g.cfg.StartTimeout, p); err != nil {
		p.Stop(0)
		return err
	}
	return nil
}

// awaitListening polls target until it accepts a TCP connection, p exits,
// timeout passes or ctx ends.
func awaitListening(ctx context.Context, target string, timeout time.Duration, p *sandbox.Process) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", target, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("checker: the gateway exited before serving %s: %v (is --gateway-cmd right, and does it serve --target?)", target, p.ExitErr())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("checker: the gateway does not accept connections on %s %v after it started (does --gateway-cmd serve --target?): %w", target, timeout, err)
		}
	}
}

// kill SIGKILLs the gateway's process group and waits until it is gone.
func (g *gatewayProc) kill() (pid int) {
	pid = g.p.PID()
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-g.p.Done()
	g.p.Stop(0) // reaps what the group left behind
	return pid
}

// stop ends the gateway as a deployment would: SIGTERM, time to drain,
// then SIGKILL.
func (g *gatewayProc) stop() {
	g.p.Stop(25 * time.Second)
	g.sb.Close()
}

// injector injects Config.KillEvery's faults in their phase.
type injector struct {
	cfg      *Config
	gw       *gatewayProc // nil unless GatewayCmd
	cons     *consumers   // for DropMember
	progress Progress
	fail     context.CancelCauseFunc // ends the run when the gateway does not come back

	stopOnce sync.Once
	halt     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	faults   []Fault
}

// startInjector starts injecting a fault every cfg.KillEvery from begin
// until end; nil when no faults are asked for in phase.
func startInjector(ctx context.Context, cfg *Config, phase FaultPhase, gw *gatewayProc, cons *consumers, begin, end time.Time, progress Progress, fail context.CancelCauseFunc) *injector {
	if cfg.KillEvery <= 0 || cfg.FaultPhase != phase {
		return nil
	}
	in := &injector{cfg: cfg, gw: gw, cons: cons, progress: progress, fail: fail, halt: make(chan struct{}), done: make(chan struct{})}
	go in.run(ctx, begin, end)
	return in
}

func (in *injector) run(ctx context.Context, begin, end time.Time) {
	defer close(in.done)
	for n := 1; in.cfg.MaxFaults == 0 || n <= in.cfg.MaxFaults; n++ {
		at := begin.Add(time.Duration(n) * in.cfg.KillEvery)
		if at.After(end) {
			return
		}
		select {
		case <-time.After(time.Until(at)):
		case <-in.halt:
			return
		case <-ctx.Done():
			return
		}
		f := in.inject(ctx, begin)
		in.mu.Lock()
		in.faults = append(in.faults, f)
		in.mu.Unlock()
		if f.Error != "" && (f.Kind == faultSigkill || f.Kind == faultInjected) {
			in.fail(fmt.Errorf("checker: fault %d: %s", n, f.Error))
			return
		}
	}
}

func (in *injector) inject(ctx context.Context, begin time.Time) Fault {
	t0 := time.Now()
	f := Fault{AtS: t0.Sub(begin).Seconds()}
	if in.gw != nil {
		f.Kind = faultSigkill
		f.PID = in.gw.kill()
		err := in.gw.start(ctx)
		f.DownS = time.Since(t0).Seconds()
		if err != nil {
			f.Error = fmt.Sprintf("the gateway did not come back after SIGKILL: %v", err)
		}
		in.progress("fault at %.1fs: SIGKILL of the gateway (pid %d); serving again after %.2fs", f.AtS, f.PID, f.DownS)
		return f
	}
	if in.cfg.Inject != nil {
		f.Kind = faultInjected
		err := in.cfg.Inject(ctx)
		f.DownS = time.Since(t0).Seconds()
		if err != nil {
			f.Error = fmt.Sprintf("the fault was not injected, or the gateway did not come back: %v", err)
		}
		in.progress("fault at %.1fs: injected; done after %.2fs (%s)", f.AtS, f.DownS, cmp.Or(f.Error, "ok"))
		return f
	}
	if in.cfg.DropMember {
		f.Kind = faultMember
		held, err := in.cons.drop(ctx, in.cfg.StartTimeout)
		f.Held = held
		if err != nil {
			f.Error = err.Error()
		}
		in.progress("fault at %.1fs: a member's connection reset with %d messages unacked (%s)", f.AtS, held, cmp.Or(f.Error, "ok"))
		return f
	}
	f.Kind = faultCommand
	cctx, cancel := context.WithTimeout(ctx, in.cfg.StartTimeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, "/bin/sh", "-c", in.cfg.FaultCmd).CombinedOutput()
	f.Output = shorten(strings.TrimSpace(string(out)), 200)
	if err != nil {
		f.Error = fmt.Sprintf("--fault-cmd failed: %v", err)
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			f.Error = fmt.Sprintf("--fault-cmd still running after %v: killed", in.cfg.StartTimeout)
		}
	}
	in.progress("fault at %.1fs: ran --fault-cmd (%s)", f.AtS, cmp.Or(f.Error, "ok"))
	return f
}

// stop ends the schedule, waits for a fault in progress (a killed gateway
// is started again before stop returns) and returns the faults injected.
func (in *injector) stop() []Fault {
	if in == nil {
		return nil
	}
	in.stopOnce.Do(func() { close(in.halt) })
	<-in.done
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.faults
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
