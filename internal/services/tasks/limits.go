package tasks

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/highload-lab/hlab/internal/procfs"
)

// WantFileLimit is the open-file limit RaiseFileLimit asks for: one
// descriptor per client socket, database connection and webhook
// connection, with room to spare (the default soft limit is 1024).
const WantFileLimit = 1 << 16

// LowFileLimit is the soft open-file limit most systems start a process
// with, the one report C's optimization 6 raised.
const LowFileLimit = 1024

// RaiseFileLimit is report C's optimization 6: raise the limit on open
// files so that many sockets do not fail with "too many open files". It
// raises the hard limit to want when allowed (root, or CAP_SYS_RESOURCE)
// and the soft limit to the hard one, and returns the limits in force.
// (Go itself raises the soft limit to the hard one at start since 1.19;
// this makes it explicit, logs it, and lifts a low hard limit when it can.)
func RaiseFileLimit(want uint64) (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("tasks: read the open-file limit: %w", err)
	}
	if lim.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
			return lim.Cur, lim.Max, fmt.Errorf("tasks: raise the open-file limit: %w", err)
		}
	}
	return lim.Cur, lim.Max, nil
}

// LowerFileLimit sets the soft open-file limit to soft (or the hard limit,
// if lower) and returns the limits in force: report C's optimization 6
// switched off (Deopt.KeepFileLimit). Go raises the soft limit to the hard
// one at start, so a process that wants the usual 1024 must set it back.
func LowerFileLimit(soft uint64) (uint64, uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("tasks: read the open-file limit: %w", err)
	}
	lim.Cur = min(soft, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		return lim.Cur, lim.Max, fmt.Errorf("tasks: lower the open-file limit to %d: %w", soft, err)
	}
	return lim.Cur, lim.Max, nil
}

// FitGOMAXPROCS sets GOMAXPROCS to the CPU quota of the process's cgroup,
// rounded down (at least 1), as uber-go/automaxprocs does, unless the
// GOMAXPROCS variable is set. Go's own default rounds a quota up and
// never goes below 2, so a service limited to one CPU runs two threads of
// Go code, uses its 100 ms of CPU in 50 ms and is throttled for the rest
// of the period: latency spikes of tens of milliseconds. It returns the
// quota found (0: none) and GOMAXPROCS after the call.
func FitGOMAXPROCS() (quota float64, procs int) {
	quota = cgroupCPUQuota()
	if quota > 0 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(1, int(math.Floor(quota+1e-9))))
	}
	return quota, runtime.GOMAXPROCS(0)
}

// cgroupCPUQuota returns the smallest CPU quota (in CPUs) on the path of
// the process's cgroup, v1 (cpu.cfs_quota_us) or v2 (cpu.max); 0 if none.
func cgroupCPUQuota() float64 {
	best := 0.0
	consider := func(q, p int64) {
		if q > 0 && p > 0 && (best == 0 || float64(q)/float64(p) < best) {
			best = float64(q) / float64(p)
		}
	}
	v1, v2 := procfs.OwnCgroupDirs("cpu")
	for _, dir := range v1 {
		q, errQ := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
		p, errP := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
		if errQ == nil && errP == nil {
			consider(q, p)
		}
	}
	for _, dir := range v2 {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
		if err != nil {
			continue
		}
		qs, ps, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		q, errQ := strconv.ParseInt(qs, 10, 64)
		p, errP := strconv.ParseInt(ps, 10, 64)
		if errQ == nil && errP == nil {
			consider(q, p)
		}
	}
	return best
}

func readInt(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
