package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"github.com/highload-lab/hlab/internal/procfs"
)

// Every child is forked from one OS thread that stays locked, and so
// alive, for the life of the lab. Pdeathsig fires when the thread that
// forked the child exits, not when the process does: forking from an
// ordinary thread would let the Go runtime retire that thread and kill a
// healthy child with it.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

// onSpawnThread runs f on the spawning thread and waits for it.
func onSpawnThread(f func()) {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked, see above
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnCh <- func() { defer close(done); f() }
	<-done
}

// startCmd starts cmd inside g (nil: no cgroup) so that the child is in
// its cgroup before it runs a single instruction of its own code.
//
//   - cgroup v2: clone3(CLONE_INTO_CGROUP) through SysProcAttr.UseCgroupFD;
//     on kernels without it (before 5.7), /bin/sh joins and then execs.
//   - cgroup v1: the spawning thread moves itself into the group (v1 places
//     threads, not just processes), forks, and moves back; the child
//     inherits the thread's cgroups at fork.
//
// Both keep the child's environment, descriptors and argv exactly as given.
func startCmd(mk func() *exec.Cmd, g *group, forceShell bool) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	var err error
	onSpawnThread(func() {
		switch {
		case g == nil:
			cmd = mk()
			err = cmd.Start()
		case g.c.mech == CgroupV2 && !forceShell:
			cmd, err = startCgroupFD(mk, g)
			if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.E2BIG) ||
				errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
				cmd, err = startShell(mk, g)
			}
		case g.c.mech == CgroupV2:
			cmd, err = startShell(mk, g)
		default:
			cmd, err = startMovedThread(mk, g)
		}
	})
	return cmd, err
}

func startCgroupFD(mk func() *exec.Cmd, g *group) (*exec.Cmd, error) {
	fd, err := syscall.Open(g.cpu, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: opening %s: %w", ErrCgroup, g.cpu, err)
	}
	defer syscall.Close(fd)
	cmd := mk()
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
	return cmd, cmd.Start()
}

// shellJoin writes the shell's pid (which exec keeps) to the cgroup.procs
// file given as $0, then becomes the program.
const shellJoin = `echo $$ > "$0" || exit 126; exec "$@"`

func startShell(mk func() *exec.Cmd, g *group) (*exec.Cmd, error) {
	cmd := mk()
	args := append([]string{"/bin/sh", "-c", shellJoin, filepath.Join(g.cpu, "cgroup.procs"), cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = "/bin/sh", args
	return cmd, cmd.Start()
}

func startMovedThread(mk func() *exec.Cmd, g *group) (*exec.Cmd, error) {
	tid := strconv.Itoa(syscall.Gettid())
	own, err := procfs.ReadCgroups("/proc/thread-self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCgroup, err)
	}
	type move struct{ home, dir string }
	var moves []move
	for _, h := range g.c.hiers() {
		path, ok := procfs.CgroupPath(own, h.ctrl)
		if !ok {
			return nil, fmt.Errorf("%w: this thread has no %s cgroup", ErrCgroup, h.ctrl)
		}
		moves = append(moves, move{home: h.dir(path), dir: g.dirOf(h)})
	}
	var cmd *exec.Cmd
	var moved int
	for _, m := range moves {
		if err = writeFile(filepath.Join(m.dir, "tasks"), tid); err != nil {
			err = fmt.Errorf("%w: joining %s: %w", ErrCgroup, m.dir, err)
			break
		}
		moved++
	}
	if err == nil {
		cmd = mk()
		err = cmd.Start()
	}
	// A thread left in a child's cgroup would put every later child there
	// too and keep the cgroup from being removed: a failure to move back
	// fails the start.
	var back []error
	for _, m := range moves[:moved] {
		if e := writeFile(filepath.Join(m.home, "tasks"), tid); e != nil {
			back = append(back, fmt.Errorf("%w: moving the spawning thread back to %s: %w", ErrCgroup, m.home, e))
		}
	}
	if len(back) > 0 {
		if err == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return nil, errors.Join(append(back, err)...)
	}
	return cmd, err
}

// threadCgroups returns the cgroups of the spawning thread (for tests).
func threadCgroups() ([]procfs.Cgroup, error) {
	var lines []procfs.Cgroup
	var err error
	onSpawnThread(func() { lines, err = procfs.ReadCgroups("/proc/thread-self/cgroup") })
	return lines, err
}
