package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a process started by Sandbox.Start. Its methods are safe for
// concurrent use.
type Process struct {
	sb    *Sandbox
	name  string
	pid   int
	cmd   *exec.Cmd
	group *group // nil with None
	samp  *sampler
	cpu   float64 // Spec.CPU: the quota asked for

	stopSignal syscall.Signal // what Stop sends first

	done    chan struct{} // closed when the process exited and was reaped
	exitErr error         // set before done is closed

	// Output: pipes the lab copies into the Spec's writers.
	copies    []copyPipe
	childEnds []*os.File // closed once the child has them
	copiers   sync.WaitGroup

	stopMu   sync.Mutex
	stopping bool
	stopped  chan struct{} // closed when Stop finished
	stopErr  error
}

type copyPipe struct {
	r *os.File
	w io.Writer
}

// PID returns the process id, which is also its process group id.
func (p *Process) PID() int { return p.pid }

// Name returns Spec.Name.
func (p *Process) Name() string { return p.name }

// CPUQuota returns the CPU quota the process asked for (Spec.CPU; 0: none)
// and whether it is enforced: false when the sandbox's Mechanism is None.
func (p *Process) CPUQuota() (cores float64, enforced bool) {
	return p.cpu, p.cpu > 0 && p.group != nil
}

// Done returns a channel that is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr returns why the process exited, once Done is closed: nil after
// exit status 0, else an error naming the process and carrying the exit
// status or signal (errors.As gives the *exec.ExitError). A process the
// memory limit killed also wraps ErrOOMKilled. Before Done it returns nil.
func (p *Process) ExitErr() error {
	select {
	case <-p.done:
		return p.exitErr
	default:
		return nil
	}
}

// CPUTime returns the user and system CPU time the process and the
// children it waited for used in all, once Done is closed (the kernel's
// count at its exit, exact where sampling ends at the last sample before
// the exit); ok is false before then.
func (p *Process) CPUTime() (cpu time.Duration, ok bool) {
	select {
	case <-p.done:
	default:
		return 0, false
	}
	if st := p.cmd.ProcessState; st != nil {
		return st.UserTime() + st.SystemTime(), true
	}
	return 0, false
}

// Samples returns the samples kept for the process (the last 6,000: ten
// minutes at 10 Hz while measured, more at 1 Hz while not), oldest first.
func (p *Process) Samples() []Sample { return p.samp.samples() }

// outputs returns the files to hand the child for stdout and stderr.
func (p *Process) outputs(stdout, stderr io.Writer) (out, errf *os.File, err error) {
	out, err = p.output(stdout)
	if err != nil {
		return nil, nil, err
	}
	if sameWriter(stdout, stderr) {
		return out, out, nil // one pipe keeps the two streams in order
	}
	errf, err = p.output(stderr)
	return out, errf, err
}

func (p *Process) output(w io.Writer) (*os.File, error) {
	switch w := w.(type) {
	case nil:
		return nil, nil // exec opens /dev/null
	case *os.File:
		return w, nil
	}
	r, cw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.copies = append(p.copies, copyPipe{r: r, w: w})
	p.childEnds = append(p.childEnds, cw)
	return cw, nil
}

func sameWriter(a, b io.Writer) (same bool) {
	if a == nil || b == nil {
		return false
	}
	defer func() {
		if recover() != nil { // uncomparable dynamic types
			same = false
		}
	}()
	return a == b
}

func (p *Process) cleanupFailedStart() {
	for _, f := range p.childEnds {
		f.Close()
	}
	for _, c := range p.copies {
		c.r.Close()
	}
	p.childEnds, p.copies = nil, nil
	if p.group != nil {
		_ = p.group.remove()
	}
}

// wait reaps the process and records why it exited.
func (p *Process) wait() {
	err := p.cmd.Wait()
	p.exitErr = p.describeExit(err)
	close(p.done)
}

func (p *Process) describeExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL &&
			p.group != nil && p.group.oomKills() > 0 {
			limit := "its cgroup's"
			if p.group.memMB > 0 {
				limit = fmt.Sprintf("its %d MiB", p.group.memMB)
			}
			return fmt.Errorf("%w: process %q (pid %d) used all of %s memory (raise Spec.MemoryMB): %w",
				ErrOOMKilled, p.name, p.pid, limit, err)
		}
	}
	return fmt.Errorf("sandbox: process %q (pid %d): %w", p.name, p.pid, err)
}

// Stop stops the process: SIGTERM to its process group, SIGKILL to
// whatever is left after grace (also every process in its cgroup, or, with
// None, its descendants), then removes its cgroup. It returns once all of
// that is done; later and concurrent calls wait for the first and return
// its result. The error is about the cleanup (ErrNotDead, ErrCgroup), not
// about how the process exited: see ExitErr.
func (p *Process) Stop(grace time.Duration) error {
	p.stopMu.Lock()
	if p.stopping {
		p.stopMu.Unlock()
		<-p.stopped
		return p.stopErr
	}
	p.stopping = true
	p.stopMu.Unlock()

	p.stopErr = p.stop(grace)
	close(p.stopped)
	p.sb.forget(p)
	return p.stopErr
}

// Kill kills the process and everything it started with SIGKILL at once,
// as a crash or the OOM killer would (no SIGTERM, no chance to clean up),
// then cleans up as Stop does. Fault tests and experiments use it.
func (p *Process) Kill() error {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
	return p.Stop(0)
}

func (p *Process) stop(grace time.Duration) error {
	if p.group == nil {
		// Note what runs now: once the process exits, its orphans are
		// no longer its descendants in /proc.
		p.samp.liveMembers()
	}
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.pid, p.stopSignal)
		t := time.NewTimer(grace)
		select {
		case <-p.done:
		case <-t.C:
		}
		t.Stop()
	}

	// Whatever is left, the process after its grace period or what it
	// started and left behind, is killed.
	var errs []error
	if p.group != nil {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
		if err := p.group.kill(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	} else {
		p.killTree()
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		errs = append(errs, fmt.Errorf("%w: %q (pid %d) is still running 10s after SIGKILL; it is probably stuck in the kernel (state D in ps)",
			ErrNotDead, p.name, p.pid))
	}
	p.samp.finish()

	// Let the copiers drain what the process wrote; a descendant that
	// escaped still holding the pipe must not keep Stop waiting.
	copied := make(chan struct{})
	go func() { p.copiers.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(time.Second):
		for _, c := range p.copies {
			c.r.Close()
		}
		<-copied
	}

	if p.group != nil {
		if err := p.group.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killTree SIGKILLs the process, its descendants and its process group
// when there is no cgroup to enumerate them.
func (p *Process) killTree() {
	for range 5 { // catch what forks while we kill
		members := p.samp.liveMembers()
		if len(members) == 0 {
			return
		}
		for _, k := range members {
			if pidAlive(k.pid, k.start) { // not a reused pid
				_ = syscall.Kill(k.pid, syscall.SIGKILL)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SetCPUs restricts the process, everything it started, and every thread
// of them, to the given CPUs (nil: every CPU of the machine). Threads
// and processes started later inherit the set from their creator.
func (p *Process) SetCPUs(cpus []int) error {
	var errs []error
	for _, k := range p.samp.liveMembers() {
		if err := SetCPUs(k.pid, cpus); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetCPUs restricts every thread of process pid to cpus (nil: all of the
// machine's).
func SetCPUs(pid int, cpus []int) error {
	var set unix.CPUSet
	if cpus == nil {
		for i := range runtime.NumCPU() {
			set.Set(i)
		}
	}
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("sandbox: threads of %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread that exited meanwhile is no error.
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("sandbox: CPU affinity of thread %d of %d: %w", tid, pid, err)
		}
	}
	return nil
}
