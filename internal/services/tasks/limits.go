package tasks

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0
	}
	var v1Path, v2Path string
	for _, line := range strings.Split(string(own), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				v1Path = parts[2]
			}
		}
	}
	best := 0.0
	consider := func(q float64) {
		if q > 0 && (best == 0 || q < best) {
			best = q
		}
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		root, point := f[3], f[4]
		switch {
		case g[0] == "cgroup" && v1Path != "" && slices.Contains(strings.Split(g[2], ","), "cpu"):
			for _, dir := range ancestors(point, root, v1Path) {
				q, errQ := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
				p, errP := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
				if errQ == nil && errP == nil && q > 0 && p > 0 {
					consider(float64(q) / float64(p))
				}
			}
		case g[0] == "cgroup2" && v2Path != "":
			for _, dir := range ancestors(point, root, v2Path) {
				b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
				if err != nil {
					continue
				}
				qs, ps, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
				q, errQ := strconv.ParseInt(qs, 10, 64)
				p, errP := strconv.ParseInt(ps, 10, 64)
				if errQ == nil && errP == nil && q > 0 && p > 0 {
					consider(float64(q) / float64(p))
				}
			}
		}
	}
	return best
}

// ancestors returns the directories of cgroup path and its parents under a
// hierarchy mounted at point (whose root in the hierarchy is root).
func ancestors(point, root, path string) []string {
	rel, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil
	}
	var dirs []string
	for {
		dirs = append(dirs, filepath.Join(point, rel))
		if rel == "." || rel == "/" {
			return dirs
		}
		rel = filepath.Dir(rel)
	}
}

func readInt(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
