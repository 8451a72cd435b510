package depsctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/internal/procfs"
)

// Options are what Up, Down and List take besides a name.
type Options struct {
	// StateDir is the dependency's state directory (its data, state.json,
	// supervisor.log); "" = DefaultRoot()/NAME. For List, a directory of
	// state directories, or one state directory.
	StateDir string
	// Upstreams are nginx's, host:port; the others take none.
	Upstreams []string
	// Exe is the hlab binary to run the supervisor from; "" = this
	// process's executable.
	Exe string
	// Timeout bounds Up's wait for the dependency to answer (a first
	// start that downloads jars included); 0 = 5 min.
	Timeout time.Duration
	// Log receives progress; nil = discard.
	Log io.Writer
}

// stopBound is how long Down waits for the supervisor after SIGTERM
// before it kills what is left: Cassandra drains for up to 30 s.
const stopBound = 45 * time.Second

// Up starts name in the background under a supervisor and returns its
// state once it answers. When it runs already, Up returns its state and
// started false, and starts nothing.
func Up(ctx context.Context, name string, opt Options) (s State, started bool, err error) {
	if _, err := Parse(name); err != nil {
		return State{}, false, err
	}
	if len(opt.Upstreams) > 0 && name != "nginx" {
		return State{}, false, fmt.Errorf("depsctl: only nginx takes upstreams, not %s", name)
	}
	dir, err := stateDir(name, opt.StateDir)
	if err != nil {
		return State{}, false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return State{}, false, fmt.Errorf("depsctl: state directory: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return State{}, false, err
	}
	defer unlock()
	if s, ok, err := readState(dir); err != nil || ok {
		return s, false, err
	}
	exe := opt.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return State{}, false, fmt.Errorf("depsctl: cannot find the hlab executable to run the supervisor: %w", err)
		}
	}
	logPath := filepath.Join(dir, logFile)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return State{}, false, fmt.Errorf("depsctl: supervisor log: %w", err)
	}
	defer logf.Close() // the supervisor has its own descriptor
	from, _ := logf.Seek(0, io.SeekEnd)
	fmt.Fprintf(logf, "--- hlab deps up %s, %s\n", name, time.Now().UTC().Format(time.RFC3339))
	cmd := exec.Command(exe, SuperviseArgs(name, dir, opt.Upstreams)...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, dir
	// A session of its own: no terminal's hangup or Ctrl-C reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return State{}, false, fmt.Errorf("depsctl: start the supervisor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if opt.Log != nil {
		fmt.Fprintf(opt.Log, "hlab deps: starting %s (pid %d; its log: %s)\n", name, cmd.Process.Pid, logPath)
	}
	timeout := opt.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return State{}, false, fmt.Errorf("%w: %s: the supervisor exited (%v): %s", ErrSupervisorDied, name, err, logTail(logPath, from))
		case <-deadline:
			stopSupervisor(cmd.Process.Pid, 0, exited)
			return State{}, false, fmt.Errorf("depsctl: %s did not answer within %s (raise --timeout); stopped it: %s", name, timeout, logTail(logPath, from))
		case <-ctx.Done():
			stopSupervisor(cmd.Process.Pid, 0, exited)
			return State{}, false, fmt.Errorf("depsctl: up %s: %w", name, ctx.Err())
		case <-tick.C:
			if s, ok, err := readState(dir); err == nil && ok && s.PID == cmd.Process.Pid {
				return s, true, nil
			}
		}
	}
}

// Down stops name (its supervisor gets SIGTERM and stops it; whatever is
// left after stopBound is killed), keeping its data unless purge, which
// removes its state directory. wasRunning is false when nothing ran.
func Down(name string, opt Options, purge bool) (wasRunning bool, err error) {
	if _, err := Parse(name); err != nil {
		return false, err
	}
	dir, err := stateDir(name, opt.StateDir)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return false, err
	}
	s, ok, err := readState(dir)
	if err == nil && ok {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, "hlab deps: stopping %s (pid %d)\n", name, s.PID)
		}
		err = stopSupervisor(s.PID, s.DepPID, nil)
		os.Remove(filepath.Join(dir, stateFile))
	}
	unlock()
	if err == nil && purge {
		if target, lerr := os.Readlink(filepath.Join(dir, dataDir)); lerr == nil {
			// A cluster out of the state directory (postgresDir), removed
			// only where no other user could have swapped a directory
			// on its path for a link.
			if cerr := checkCluster(target); cerr != nil {
				err = fmt.Errorf("depsctl: purge left the cluster in place: %w", cerr)
			} else {
				os.RemoveAll(target)
			}
		}
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("depsctl: purge %s: %w", dir, rerr))
		}
	}
	return ok, err
}

// stopSupervisor sends the supervisor SIGTERM and waits for it to exit
// (on exited when it is Up's child, else by polling), then kills it and
// the dependency's process group (depPID, 0 = unknown) after stopBound.
func stopSupervisor(pid, depPID int, exited <-chan error) error {
	gone := func() bool {
		if exited != nil {
			select {
			case <-exited:
				return true
			default:
				return false
			}
		}
		return !procfs.Alive(pid)
	}
	syscall.Kill(pid, syscall.SIGTERM)
	if waitFor(stopBound, gone) && (depPID == 0 || waitFor(5*time.Second, func() bool { return !procfs.Alive(depPID) })) {
		return nil
	}
	if depPID > 0 {
		syscall.Kill(-depPID, syscall.SIGKILL)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if !waitFor(10*time.Second, gone) || (depPID > 0 && !waitFor(5*time.Second, func() bool { return !procfs.Alive(depPID) })) {
		return fmt.Errorf("depsctl: the supervisor (pid %d) or its dependency (pid %d) did not die after SIGKILL", pid, depPID)
	}
	return fmt.Errorf("depsctl: the supervisor (pid %d) did not stop within %s of SIGTERM: killed it and its dependency", pid, stopBound)
}

// waitFor polls cond every 50 ms until it holds (true) or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// List returns the states of the dependencies running under root (""
// = DefaultRoot()), by name; root may also be one state directory.
func List(root string) ([]State, error) {
	if root == "" {
		var err error
		if root, err = DefaultRoot(); err != nil {
			return nil, err
		}
	}
	dirs := []string{root}
	if _, err := os.Stat(filepath.Join(root, stateFile)); err != nil {
		ents, err := os.ReadDir(root)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("depsctl: %w", err)
		}
		dirs = dirs[:0]
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(root, e.Name()))
			}
		}
	}
	var out []State
	for _, d := range dirs {
		if s, ok, err := readState(d); err == nil && ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// lockDir locks dir against another Up or Down of the same dependency.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("depsctl: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("depsctl: lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// logTail returns the last lines the supervisor logged since offset.
func logTail(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if from < int64(len(b)) {
		b = b[from:]
	}
	lines := splitLines(string(b))
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return fmt.Sprintf("%s says:\n  %s", path, strings.Join(lines, "\n  "))
}
