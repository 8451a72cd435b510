// Package cpuuse measures the CPU time this process uses over a stretch of
// time and the CPUs it has to use, so that a load generator can say when it,
// and not the system it drives, was the bottleneck: a generator that used
// nearly all the CPU it had measured its own limit.
//
//	m := cpuuse.Start()
//	// ... drive load ...
//	u := m.Stop()
//	if u.Saturated() {
//		fmt.Printf("the generator may be the bottleneck: it used %.2f of its %g CPUs\n", u.CPUs, u.Available)
//	}
//
// CPU time is the whole process's (user + system, all threads, from
// getrusage), so whatever else the process does in the meantime counts too.
// The CPUs available are the least of the cgroup CPU quota of the process's
// own cgroup and its ancestors (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us /
// cpu.cfs_period_us), the CPUs in its affinity mask (taskset), and the
// machine's CPUs.
package cpuuse

import (
	"runtime"
	"syscall"
	"time"
)

// SaturatedShare is the share of its available CPUs above which a process
// counts as saturated: past it, it was likely waiting for CPU, not for the
// system it measured.
const SaturatedShare = 0.9

// Meter measures one stretch of time; Start begins it.
type Meter struct {
	wall time.Time
	cpu  time.Duration
	ok   bool
}

// Start begins measuring the process's CPU use.
func Start() Meter {
	cpu, err := ProcessCPU()
	return Meter{wall: time.Now(), cpu: cpu, ok: err == nil}
}

// Usage is the CPU a process used over a stretch of time and what it had.
type Usage struct {
	Wall time.Duration
	// CPU is the user and system time of the whole process; 0 when it
	// could not be read (Measured false).
	CPU      time.Duration
	Measured bool
	// CPUs is CPU / Wall: the CPUs used on average.
	CPUs float64
	// Available is the CPUs the process could use, and Limit what set it:
	// "cgroup" (a CPU quota) or "cpus" (the CPUs it may run on: the
	// machine's, or fewer in its affinity mask, as taskset sets).
	Available float64
	Limit     string
}

// Saturated reports whether the process used more than SaturatedShare of
// the CPUs it had.
func (u Usage) Saturated() bool {
	return u.Measured && u.Available > 0 && u.CPUs > SaturatedShare*u.Available
}

// Stop ends the measurement. It may be called more than once; each call
// measures from Start.
func (m Meter) Stop() Usage {
	u := Usage{Wall: time.Since(m.wall)}
	u.Available, u.Limit = Available()
	if cpu, err := ProcessCPU(); err == nil && m.ok {
		u.CPU, u.Measured = cpu-m.cpu, true
		if u.Wall > 0 {
			u.CPUs = u.CPU.Seconds() / u.Wall.Seconds()
		}
	}
	return u
}

// ProcessCPU returns the user and system CPU time the process has used
// since it started, all threads included.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// Available returns the CPUs this process can use now and what limits
// them: "cgroup" or "cpus".
func Available() (cpus float64, limit string) {
	// NumCPU is the affinity mask at start; the mask may have changed since.
	cpus, limit = float64(runtime.NumCPU()), "cpus"
	if n := affinity(); n > 0 {
		cpus = float64(n)
	}
	if q, ok := cgroupQuota(""); ok && q < cpus {
		cpus, limit = q, "cgroup"
	}
	return cpus, limit
}
