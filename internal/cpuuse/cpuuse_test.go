package cpuuse

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// fakeRoot writes files under a temporary root: path -> content.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupQuota(t *testing.T) {
	const v2mounts = "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	const v1mounts = "31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw shared:5 - cgroup cgroup rw,cpu,cpuacct\n" +
		"32 25 0:28 / /sys/fs/cgroup/memory rw shared:6 - cgroup cgroup rw,memory\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  float64
		ok    bool
	}{
		{"v2 own quota", map[string]string{
			"/proc/self/cgroup":              "0::/lab/gen\n",
			"/proc/self/mountinfo":           v2mounts,
			"/sys/fs/cgroup/cpu.max":         "max 100000\n",
			"/sys/fs/cgroup/lab/cpu.max":     "max 100000\n",
			"/sys/fs/cgroup/lab/gen/cpu.max": "10000 100000\n",
		}, 0.1, true},
		{"v2 parent's quota is tighter", map[string]string{
			"/proc/self/cgroup":              "0::/lab/gen\n",
			"/proc/self/mountinfo":           v2mounts,
			"/sys/fs/cgroup/lab/cpu.max":     "50000 100000\n",
			"/sys/fs/cgroup/lab/gen/cpu.max": "200000 100000\n",
		}, 0.5, true},
		{"v2 no quota", map[string]string{
			"/proc/self/cgroup":              "0::/lab/gen\n",
			"/proc/self/mountinfo":           v2mounts,
			"/sys/fs/cgroup/lab/gen/cpu.max": "max 100000\n",
		}, 0, false},
		{"v1 quota", map[string]string{
			"/proc/self/cgroup":                                     "5:memory:/x\n4:cpu,cpuacct:/hlab/gen\n0::/\n",
			"/proc/self/mountinfo":                                  v1mounts,
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":           "-1\n",
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us":          "100000\n",
			"/sys/fs/cgroup/cpu,cpuacct/hlab/gen/cpu.cfs_quota_us":  "25000\n",
			"/sys/fs/cgroup/cpu,cpuacct/hlab/gen/cpu.cfs_period_us": "100000\n",
		}, 0.25, true},
		{"v1 no quota", map[string]string{
			"/proc/self/cgroup":                            "4:cpu,cpuacct:/\n",
			"/proc/self/mountinfo":                         v1mounts,
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "-1\n",
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
		}, 0, false},
		{"container: mount root is the process's cgroup", map[string]string{
			"/proc/self/cgroup":      "0::/docker/abc\n",
			"/proc/self/mountinfo":   "30 25 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			"/sys/fs/cgroup/cpu.max": "150000 100000\n",
		}, 1.5, true},
		{"no cgroup files", map[string]string{}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := cgroupQuota(fakeRoot(t, tc.files))
			if ok != tc.ok || got != tc.want {
				t.Errorf("cgroupQuota = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestMeterCountsBusyCPU(t *testing.T) {
	m := Start()
	deadline := time.Now().Add(200 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	u := m.Stop()
	if !u.Measured || u.CPU <= 0 {
		t.Fatalf("measured no CPU: %+v", u)
	}
	// One goroutine spinning uses about one CPU; a busy machine may give it less.
	if u.CPUs < 0.2 || u.CPUs > float64(runtime.NumCPU())+0.5 {
		t.Errorf("CPUs = %.2f while one goroutine spun (%d iterations)", u.CPUs, x)
	}
	if u.Available <= 0 || u.Available > float64(runtime.NumCPU()) {
		t.Errorf("Available = %v, NumCPU %d", u.Available, runtime.NumCPU())
	}
}

func TestSaturated(t *testing.T) {
	for _, tc := range []struct {
		u    Usage
		want bool
	}{
		{Usage{Measured: true, CPUs: 0.97, Available: 1}, true},
		{Usage{Measured: true, CPUs: 0.099, Available: 0.1}, true},
		{Usage{Measured: true, CPUs: 0.5, Available: 1}, false},
		{Usage{Measured: false, CPUs: 0, Available: 1}, false},
	} {
		if got := tc.u.Saturated(); got != tc.want {
			t.Errorf("%+v: Saturated = %v, want %v", tc.u, got, tc.want)
		}
	}
}
