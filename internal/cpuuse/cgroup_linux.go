package cpuuse

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/highload-lab/hlab/internal/procfs"
)

// cgroupQuota returns the tightest CPU quota (in CPUs) on the process's
// cgroup and its ancestors, in cgroup v2 and v1 alike, and false when there
// is none. root prefixes every path read, for tests; "" in real use.
func cgroupQuota(root string) (float64, bool) {
	own, err := procfs.ReadCgroups(root + "/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	mounts, err := procfs.ReadMountinfo(root + "/proc/self/mountinfo")
	if err != nil {
		return 0, false
	}
	best, found := 0.0, false
	take := func(q float64, ok bool) {
		if ok && (!found || q < best) {
			best, found = q, true
		}
	}
	for _, m := range mounts {
		switch {
		case m.FSType == "cgroup2":
			if p, ok := procfs.CgroupPath(own, ""); ok {
				take(walk(root, m, p, quotaV2))
			}
		case m.FSType == "cgroup" && slices.Contains(m.Opts, "cpu"):
			if p, ok := procfs.CgroupPath(own, "cpu"); ok {
				take(walk(root, m, p, quotaV1))
			}
		}
	}
	return best, found
}

// walk reads the quota of the cgroup at path under mount m and of each
// ancestor up to the mount's root, and returns the smallest.
func walk(root string, m procfs.Mount, path string, quota func(dir string) (float64, bool)) (float64, bool) {
	rel := path
	if m.Root != "/" {
		var ok bool
		if rel, ok = strings.CutPrefix(path, m.Root); !ok {
			return 0, false // the process's cgroup is outside this mount
		}
	}
	base := filepath.Join(root, m.Point)
	dir := filepath.Join(base, rel)
	best, found := 0.0, false
	for {
		if q, ok := quota(dir); ok && (!found || q < best) {
			best, found = q, true
		}
		if dir == base || !strings.HasPrefix(dir, base) {
			break
		}
		dir = filepath.Dir(dir)
	}
	return best, found
}

// quotaV2 reads cpu.max: "max 100000" (no quota) or "<quota> <period>".
func quotaV2(dir string) (float64, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	return ratio(f[0], f[1])
}

// quotaV1 reads cpu.cfs_quota_us (-1: no quota) and cpu.cfs_period_us.
func quotaV1(dir string) (float64, bool) {
	q, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	p, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return ratio(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

func ratio(quota, period string) (float64, bool) {
	q, err1 := strconv.ParseFloat(quota, 64)
	p, err2 := strconv.ParseFloat(period, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return q / p, true
}
