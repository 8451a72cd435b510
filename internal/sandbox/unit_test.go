package sandbox

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestParseStatmRSS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"5120 1234 300 10 0 900 0\n", 1234 * 4096},
		{"0 0 0 0 0 0 0\n", 0},
		{"12\n", 0},
		{"12 junk 0\n", 0},
	} {
		if got := parseStatmRSS([]byte(tc.in), 4096); got != tc.want {
			t.Errorf("parseStatmRSS(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// statm's resident figure is the one /proc/<pid>/status shows as VmRSS.
func TestReadRSSMatchesVmRSS(t *testing.T) {
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1 // resident
	}
	rss, err := readRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var vmRSS int64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &vmRSS)
		}
	}
	// The two reads are microseconds apart; allow for pages touched between.
	if vmRSS == 0 || rss < 64<<20 || math.Abs(float64(rss-vmRSS*1024)) > 4<<20 {
		t.Fatalf("statm RSS %d, status VmRSS %d kB", rss, vmRSS)
	}
	runtime.KeepAlive(b)
}

func TestGroupNames(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"api", "api"},
		{"my-service/v2 x", "my_service_v2_x"},
		{"", "proc"},
		{"a.b_c", "a.b_c"},
		{"0123456789012345678901234567890123456789-too-long", "0123456789012345678901234567890123456789"},
	} {
		if got := cleanName(tc.in); got != tc.want {
			t.Errorf("cleanName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	pid, start, ok := parseOwner(groupName("some-name", 7))
	if !ok || pid != os.Getpid() || start != ownerStart {
		t.Errorf("parseOwner(groupName) = %d, %d, %v", pid, start, ok)
	}
	if !pidAlive(pid, start) {
		t.Errorf("this process is not alive by its own group name")
	}
	for _, bad := range []string{"cgroup.procs", "lab", "12-x", "x.1-y", "0.5-y", "1.x-y"} {
		if _, _, ok := parseOwner(bad); ok {
			t.Errorf("parseOwner(%q) accepted a foreign name", bad)
		}
	}
}

func TestHierDir(t *testing.T) {
	h := &hier{mount: "/sys/fs/cgroup/memory", root: "/docker/abc"}
	if got := h.dir("/docker/abc/x"); got != "/sys/fs/cgroup/memory/x" {
		t.Errorf("dir under a mount root = %s", got)
	}
}

type funcWriter func([]byte) (int, error)

func (f funcWriter) Write(b []byte) (int, error) { return f(b) }

func TestSameWriter(t *testing.T) {
	f := funcWriter(func(b []byte) (int, error) { return len(b), nil })
	var w io.Writer = f
	if sameWriter(w, w) {
		t.Errorf("uncomparable writers reported equal") // and did not panic
	}
	if !sameWriter(os.Stderr, os.Stderr) || sameWriter(os.Stdout, os.Stderr) || sameWriter(nil, nil) {
		t.Errorf("sameWriter is wrong for *os.File")
	}
}

// TestSweepOnlyDead: New removes cgroups of dead owners (here pid 1 with a
// start time it does not have) and leaves live owners' and foreign ones.
func TestSweepOnlyDead(t *testing.T) {
	s := newSandboxT(t)
	requireLimits(t, s)
	var dead, live, foreign []string
	for _, h := range s.cg.hiers() {
		if err := s.cg.ensureParent(h); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, filepath.Join(h.parent(), "1.1-dead-1"))
		live = append(live, filepath.Join(h.parent(), groupName("live", 999999)))
		foreign = append(foreign, filepath.Join(h.parent(), "foreign"))
	}
	all := slices.Concat(dead, live, foreign)
	for _, d := range all {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeDirs(all) })
	newSandboxT(t)
	for _, d := range dead {
		if dirExists(d) {
			t.Errorf("stale %s was not swept", d)
		}
	}
	for _, d := range append(live, foreign...) {
		if !dirExists(d) {
			t.Errorf("%s was swept", d)
		}
	}
}
