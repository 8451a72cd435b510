package sandbox

import "errors"

var (
	// ErrClosed is returned by Sandbox.Start after Sandbox.Close.
	ErrClosed = errors.New("sandbox: closed")

	// ErrInvalidSpec is returned by Sandbox.Start when a Spec field is out
	// of range (empty Path, negative or too small CPU, negative MemoryMB).
	ErrInvalidSpec = errors.New("sandbox: invalid spec")

	// ErrCgroup is returned by Sandbox.Start when the process's cgroup
	// cannot be created or configured, and by Process.Stop and
	// Sandbox.Close when a cgroup cannot be removed. The wrapping error
	// names the directory and what to do.
	ErrCgroup = errors.New("sandbox: cgroup")

	// ErrOOMKilled is wrapped by Process.ExitErr when the kernel killed the
	// process because its cgroup reached Spec.MemoryMB.
	ErrOOMKilled = errors.New("sandbox: killed by the memory limit")

	// ErrNotDead is returned by Process.Stop and Sandbox.Close when a
	// process survived SIGKILL for several seconds (typically stuck in
	// uninterruptible I/O, state D in ps).
	ErrNotDead = errors.New("sandbox: process did not die after SIGKILL")
)
