// Package sandbox runs the services of an experiment as child processes,
// each under a CPU quota and a memory limit like the containers of the
// reference reports, samples their CPU use and resident memory every
// 100 ms, and cleans up after them: no child process or cgroup outlives
// the lab, even when the lab crashes.
//
//	sb, err := sandbox.New()
//	if err != nil { ... }
//	defer sb.Close()
//	if sb.Mechanism() == sandbox.None {
//		log.Printf("warning: services run without CPU/memory limits: %s", sb.Reason())
//	}
//	p, err := sb.Start(ctx, sandbox.Spec{
//		Name: "api", Path: exe, Args: []string{"serve", "api"},
//		CPU: 0.2, MemoryMB: 256, Stdout: logFile, Stderr: logFile,
//	})
//	if err != nil { ... }
//	m := p.Measure()
//	// ... drive load ...
//	u := m.Stop() // u.CPUAvg ≈ 0.2 when the service is CPU-bound
//	err = p.Stop(5 * time.Second)
//
// # Mechanisms
//
// New picks the first that works and reports it with Mechanism:
//
//   - CgroupV2 (the unified hierarchy, /sys/fs/cgroup/cgroup.controllers
//     exists): each process gets cpu.max "<CPU*100000> 100000",
//     memory.max, memory.swap.max 0 and memory.oom.group 1. Its cgroup is
//     <the lab's own cgroup>/hlab/<name>. cgroup v2 lets a cgroup hand the
//     cpu and memory controllers to children only while it holds no
//     process itself; when the lab is alone in its cgroup (as under
//     systemd-run --scope) it moves itself into a leaf, hlab/<pid>...-lab-0,
//     to make that possible; when it shares it and runs as root, it uses
//     /sys/fs/cgroup/hlab instead.
//   - CgroupV1 (separate cpu and memory hierarchies): cpu.cfs_period_us
//     100000 and cpu.cfs_quota_us CPU*100000; memory.limit_in_bytes, and
//     memory.memsw.limit_in_bytes to the same value where swap accounting
//     exists (else memory.swappiness 0), so the limit cannot be dodged by
//     swapping. The cgroups are <the lab's own cgroup in that
//     hierarchy>/hlab/<name>, for example /sys/fs/cgroup/cpu/hlab/... and
//     /sys/fs/cgroup/memory/process_api/<id>/hlab/....
//   - None: no usable cgroups (not root, a read-only /sys/fs/cgroup, the
//     controllers not delegated, or a v2 cgroup shared with other
//     processes). Processes run unconstrained, CPU and MemoryMB are
//     ignored, and sampling still works. Reason says why and what to do,
//     typically: run hlab as root, or in a cgroup delegated to you with
//     systemd-run --user --scope -p Delegate=yes hlab lab.
//
// A process joins its cgroup before it runs any code of its own: on v2 it
// is created inside it (clone3 with CLONE_INTO_CGROUP; /bin/sh joins and
// execs on kernels before 5.7), on v1 the thread that forks it steps into
// its cgroups for the fork. Its environment, descriptors and arguments
// are passed on untouched.
//
// # Cleanup guarantees
//
//   - Process.Stop sends SIGTERM to the process group, SIGKILL after the
//     grace period to whatever is left in the group and the cgroup (with
//     None: to every descendant it has seen, even one that left the group),
//     and removes the cgroup. Sandbox.Close does that for every process,
//     all at once, with DefaultGrace. Canceling the context given to Start
//     stops the process too.
//   - If the lab dies, even by SIGKILL, the kernel kills each child
//     (Pdeathsig, delivered when the thread that forked it exits: every
//     child is forked from one thread locked for the life of the lab).
//     A lab should still turn Ctrl-C into Close (signal.NotifyContext),
//     which also stops what the children started.
//   - Cgroups are named <owner pid>.<owner start time>-<name>-<seq>. New
//     removes those whose owner is no longer alive, after killing any
//     process left in them, and removes the hlab directory once empty: a
//     crash leaves cgroups behind only until the next lab starts.
//
// # Measurement
//
// One goroutine per process reads, every 100 ms while a Meter measures it
// and every second otherwise, the CPU time and resident memory of every
// process in its cgroup (cgroup.procs; with None,
// the process and its descendants found through /proc). CPU time is
// cpu.stat usage_usec on v2 (exact, and it counts processes that already
// exited), cpuacct.usage where cpuacct shares v1's cpu hierarchy, and
// otherwise the sum of utime+stime from /proc/<pid>/stat (10 ms ticks; a
// short-lived grandchild's CPU is counted while it is seen alive). RSS is
// the sum of the resident pages of /proc/<pid>/statm (VmRSS). Throttled counts CFS periods
// in which the quota stopped the process (cpu.stat nr_throttled).
//
// Measure opens a window; its Stop returns the averages and maxima over
// the window, which begins and ends with a reading of its own so that
// CPUAvg covers exactly the time between them. Process.Samples returns the
// raw series, kept for the last 6,000 samples.
//
// All methods of Sandbox, Process and Meter are safe for concurrent use.
package sandbox
