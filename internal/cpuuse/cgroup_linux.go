package cpuuse

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cgroupQuota returns the tightest CPU quota (in CPUs) on the process's
// cgroup and its ancestors, in cgroup v2 and v1 alike, and false when there
// is none. root prefixes every path read, for tests; "" in real use.
func cgroupQuota(root string) (float64, bool) {
	own, err := readCgroups(root + "/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	mounts, err := readMounts(root + "/proc/self/mountinfo")
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
		case m.fstype == "cgroup2":
			if p, ok := own["0:"]; ok {
				take(walk(root, m, p, quotaV2))
			}
		case m.fstype == "cgroup" && slices.Contains(strings.Split(m.superOpts, ","), "cpu"):
			if p, ok := own["cpu"]; ok {
				take(walk(root, m, p, quotaV1))
			}
		}
	}
	return best, found
}

type mount struct{ root, point, fstype, superOpts string }

func readMounts(file string) ([]mount, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		ms = append(ms, mount{root: unescape(a[3]), point: unescape(a[4]), fstype: b[0], superOpts: b[2]})
	}
	return ms, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readCgroups maps each v1 controller of /proc/self/cgroup to the
// process's cgroup path in its hierarchy, and "0:" to the v2 path.
func readCgroups(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			own["0:"] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// walk reads the quota of the cgroup at path under mount m and of each
// ancestor up to the mount's root, and returns the smallest.
func walk(root string, m mount, path string, quota func(dir string) (float64, bool)) (float64, bool) {
	rel := path
	if m.root != "/" {
		var ok bool
		if rel, ok = strings.CutPrefix(path, m.root); !ok {
			return 0, false // the process's cgroup is outside this mount
		}
	}
	base := filepath.Join(root, m.point)
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
