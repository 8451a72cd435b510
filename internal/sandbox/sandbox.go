package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Mechanism is how the sandbox enforces CPU and memory limits.
type Mechanism string

const (
	CgroupV2 Mechanism = "cgroup-v2" // the unified hierarchy: cpu.max, memory.max
	CgroupV1 Mechanism = "cgroup-v1" // separate cpu and memory hierarchies: CFS quota, memory.limit_in_bytes
	None     Mechanism = "none"      // no limits: processes run unconstrained but are still sampled
)

// DefaultGrace is how long Close, and a canceled Start context, wait after
// SIGTERM before sending SIGKILL.
const DefaultGrace = 5 * time.Second

// Spec describes a process to start.
type Spec struct {
	Name     string   // short label, used in the cgroup name and in errors
	Path     string   // executable: looked up in PATH when it has no slash, else relative to the lab's working directory
	Args     []string // arguments, without the program name
	Env      []string // nil = inherit the lab's environment
	Dir      string   // working directory; "" = the lab's
	CPU      float64  // fraction of one CPU (0.2 = 20% of a core; 1.5 = one and a half); 0 = no CPU limit
	MemoryMB int      // memory limit in MiB, swap excluded; 0 = no memory limit

	Stdout, Stderr io.Writer // nil = discard; an *os.File is handed to the process directly

	// User, when set, runs the process as that user (and its primary
	// group): Postgres refuses to run as root.
	User string
	// StopSignal is what Stop sends first (default SIGTERM); Postgres, for
	// one, shuts down fast on SIGINT and waits for its clients on SIGTERM.
	StopSignal syscall.Signal
}

func (s *Spec) validate() error {
	switch {
	case s.Path == "":
		return fmt.Errorf("%w: %q: Path is empty", ErrInvalidSpec, s.Name)
	case s.CPU < 0 || math.IsNaN(s.CPU) || math.IsInf(s.CPU, 0):
		return fmt.Errorf("%w: %q: CPU %v must be a non-negative fraction of a core (0 = no limit)", ErrInvalidSpec, s.Name, s.CPU)
	case s.CPU > 0 && s.CPU*cfsPeriodUS < 1000:
		return fmt.Errorf("%w: %q: CPU %v is below the kernel's minimum quota of 0.01", ErrInvalidSpec, s.Name, s.CPU)
	case s.MemoryMB < 0:
		return fmt.Errorf("%w: %q: MemoryMB %d must be >= 0 (0 = no limit)", ErrInvalidSpec, s.Name, s.MemoryMB)
	}
	return nil
}

// Sandbox starts processes under CPU and memory limits and cleans up
// after them. Its methods are safe for concurrent use.
type Sandbox struct {
	mech   Mechanism
	reason string
	cg     *cgroups // nil with None

	forceShell bool // tests: join v2 cgroups through /bin/sh

	mu     sync.Mutex
	closed bool
	procs  map[*Process]struct{}

	closeOnce sync.Once
	closeErr  error
}

// New detects the limit mechanism of this machine and removes the
// cgroups (and kills the processes in them) that labs which died without
// cleaning up left behind. When no cgroups are usable it still returns a
// working Sandbox with Mechanism None; Reason says why and what to do.
func New() (*Sandbox, error) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return nil, fmt.Errorf("sandbox: /proc is not mounted (%w); the sandbox samples processes through it", err)
	}
	cg, reason := detect()
	return newSandbox(cg, reason), nil
}

// Unlimited returns a Sandbox that enforces no limits (Mechanism None,
// with reason as its Reason), as New does on a machine without usable
// cgroups: its processes are still sampled, stopped and cleaned up.
func Unlimited(reason string) *Sandbox { return newSandbox(nil, reason) }

func newSandbox(cg *cgroups, reason string) *Sandbox {
	s := &Sandbox{cg: cg, procs: make(map[*Process]struct{})}
	if cg == nil {
		s.mech, s.reason = None, reason
	} else {
		s.mech = cg.mech
	}
	return s
}

// Mechanism reports how limits are enforced.
func (s *Sandbox) Mechanism() Mechanism { return s.mech }

// Reason says why the Mechanism is None and what to do about it; it is
// empty otherwise.
func (s *Sandbox) Reason() string { return s.reason }

// Start starts a process described by spec in its own process group and,
// unless the Mechanism is None, in its own cgroup with spec's limits. The
// process is killed if the lab dies (even by SIGKILL), and stopped with
// Stop(DefaultGrace) when ctx is canceled. Call Stop or Close even after
// the process exited: they remove its cgroup and whatever it left running.
func (s *Sandbox) Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: starting %q: %w", spec.Name, err)
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	path, err := exec.LookPath(spec.Path)
	if err == nil && !filepath.IsAbs(path) {
		// exec would resolve a relative path against Dir; the caller
		// means the lab's working directory.
		path, err = filepath.Abs(path)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: starting %q: %w", spec.Name, err)
	}

	// Holding mu across the start keeps Close from missing a process that
	// is being started.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: cannot start %q", ErrClosed, spec.Name)
	}

	stopSig := spec.StopSignal
	if stopSig == 0 {
		stopSig = syscall.SIGTERM
	}
	p := &Process{
		sb:         s,
		name:       spec.Name,
		cpu:        spec.CPU,
		stopSignal: stopSig,
		done:       make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	if s.cg != nil {
		if p.group, err = s.cg.create(&spec); err != nil {
			return nil, err
		}
	}
	stdout, stderr, err := p.outputs(spec.Stdout, spec.Stderr)
	if err != nil {
		p.cleanupFailedStart()
		return nil, fmt.Errorf("sandbox: starting %q: %w", spec.Name, err)
	}
	cred, err := credentialOf(spec.User)
	if err != nil {
		p.cleanupFailedStart()
		return nil, fmt.Errorf("sandbox: starting %q: %w", spec.Name, err)
	}
	mk := func() *exec.Cmd {
		cmd := &exec.Cmd{
			Path:   path,
			Args:   append([]string{spec.Path}, spec.Args...),
			Env:    spec.Env,
			Dir:    spec.Dir,
			Stdout: stdout,
			Stderr: stderr,
			SysProcAttr: &syscall.SysProcAttr{
				Setpgid:    true,            // Stop signals the whole group
				Pdeathsig:  syscall.SIGKILL, // the lab died: so does the child
				Credential: cred,
			},
		}
		return cmd
	}
	cmd, err := startCmd(mk, p.group, s.forceShell)
	for _, w := range p.childEnds {
		w.Close()
	}
	p.childEnds = nil
	if err != nil {
		p.cleanupFailedStart()
		return nil, fmt.Errorf("sandbox: starting %q: %w", spec.Name, err)
	}
	started := time.Now()
	p.cmd = cmd
	p.pid = cmd.Process.Pid
	p.samp = newSampler(newSource(p.pid, p.group), started)
	p.copiers.Add(len(p.copies))
	for _, c := range p.copies {
		go func() {
			defer p.copiers.Done()
			_, _ = io.Copy(c.w, c.r)
			c.r.Close()
		}()
	}
	go p.wait()
	go p.samp.run(p.done)
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				_ = p.Stop(DefaultGrace)
			case <-p.stopped:
			}
		}()
	}
	s.procs[p] = struct{}{}
	return p, nil
}

// Processes returns the processes started and not yet stopped.
func (s *Sandbox) Processes() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Process, 0, len(s.procs))
	for p := range s.procs {
		out = append(out, p)
	}
	return out
}

func (s *Sandbox) forget(p *Process) {
	s.mu.Lock()
	delete(s.procs, p)
	s.mu.Unlock()
}

// Close stops every process the sandbox started and not yet stopped
// (SIGTERM, SIGKILL after DefaultGrace; all at once) and removes every
// cgroup it made. Start fails with ErrClosed afterwards. Calling Close
// again returns the first call's result.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		procs := make([]*Process, 0, len(s.procs))
		for p := range s.procs {
			procs = append(procs, p)
		}
		s.mu.Unlock()

		errs := make([]error, len(procs))
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Go(func() { errs[i] = p.Stop(DefaultGrace) })
		}
		wg.Wait()
		if s.cg != nil {
			s.cg.removeParents()
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// credentialOf returns the credential to run as user, nil for "".
func credentialOf(name string) (*syscall.Credential, error) {
	if name == "" {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%w: user %q: %v", ErrInvalidSpec, name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: user %q has a non-numeric uid/gid", ErrInvalidSpec, name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
