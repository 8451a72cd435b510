package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/testkit"
)

// TestLabScaleQuick runs the scale experiment for real (services under
// quota, the load balancer, the generator) and checks the JSON contract.
// Whether the claim reproduces is the lab's verdict, not this test's.
func TestLabScaleQuick(t *testing.T) {
	bin := testkit.HlabBinary(t)
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "r.json")
	// The default, relative --report (lab-report) as make lab runs it.
	cmd := exec.Command(bin, "lab", "scale", "--quick", "--pairs", "2", "--json", jsonPath)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hlab lab scale: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Scoreboard") || !strings.Contains(string(out), "REPRODUCED") && !strings.Contains(string(out), "INCONCLUSIVE") {
		t.Errorf("output has no scoreboard or verdict:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "lab-report", "index.html")); err != nil {
		t.Errorf("no HTML report: %v", err)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Machine struct {
			CPUs     int    `json:"cpus"`
			CPUQuota string `json:"cpu_quota"`
			Go       string `json:"go"`
		} `json:"machine"`
		Experiments []struct {
			Name       string            `json:"name"`
			Claim      string            `json:"claim"`
			Ratio      *float64          `json:"ratio"`
			Reproduced *bool             `json:"reproduced"`
			Env        map[string]string `json:"env"`
			Rows       []struct {
				Label  string   `json:"label"`
				RPS    *float64 `json:"rps"`
				MeanMS *float64 `json:"mean_ms"`
				P99MS  *float64 `json:"p99_ms"`
				Runs   int      `json:"runs"`
				Ref    *struct {
					RPS *float64 `json:"rps"`
				} `json:"ref"`
			} `json:"rows"`
		} `json:"experiments"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if doc.Machine.CPUs < 1 || doc.Machine.Go == "" || doc.Machine.CPUQuota == "" {
		t.Errorf("machine = %+v", doc.Machine)
	}
	if len(doc.Experiments) != 1 {
		t.Fatalf("%d experiments, want 1", len(doc.Experiments))
	}
	e := doc.Experiments[0]
	if e.Name != "scale" || e.Claim == "" || e.Ratio == nil || e.Reproduced == nil {
		t.Errorf("experiment header incomplete: name %q claim %q ratio %v reproduced %v", e.Name, e.Claim, e.Ratio, e.Reproduced)
	}
	if !strings.HasPrefix(e.Env["lb"], "nginx") && !strings.HasPrefix(e.Env["lb"], "builtin") {
		t.Errorf("env.lb = %q, want which load balancer ran", e.Env["lb"])
	}
	closed := 0
	for _, r := range e.Rows {
		if r.Ref == nil || r.Ref.RPS == nil {
			continue // the sweeps have no reference figure
		}
		closed++
		if r.RPS == nil || r.MeanMS == nil || r.P99MS == nil || *r.RPS <= 0 || r.Runs < 1 || r.Runs > 2 {
			t.Errorf("row %q: rps %v mean %v p99 %v runs %d", r.Label, r.RPS, r.MeanMS, r.P99MS, r.Runs)
		}
	}
	if closed != 4 {
		t.Errorf("%d rows with the report's figures, want 4", closed)
	}
}

// TestLabInterruptLeavesNothing interrupts a lab run while its services
// run and checks that no child process and no cgroup of it survives.
func TestLabInterruptLeavesNothing(t *testing.T) {
	bin := testkit.HlabBinary(t)
	cmd := exec.Command(bin, "lab", "scale", "--quick", "--report", t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until load runs against three services behind nginx (its
	// workers are grandchildren of the lab): the hardest state to clean up.
	sc := bufio.NewScanner(stderr)
	deadline := time.Now().Add(120 * time.Second)
	for sc.Scan() && !strings.Contains(sc.Text(), "three instances + LB, 1 connection: round 1 ") {
		if time.Now().After(deadline) {
			t.Fatal("the lab did not reach its first measured run")
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	kids := descendants(cmd.Process.Pid)
	groups := cgroupsOf(t, cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("found no child process of the lab to check")
	}
	if len(groups) == 0 && quotaAvailable() {
		t.Fatal("found no cgroup of the lab to check")
	}
	t.Logf("interrupting the lab (pid %d) with children %v and cgroups %v", cmd.Process.Pid, kids, groups)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := testkit.WaitExit(t, cmd, 30*time.Second, "the lab, after Ctrl-C,"); err == nil {
		t.Error("an interrupted lab exited 0")
	}
	for _, pid := range kids {
		if alive(pid) {
			t.Errorf("child %d survived the interrupted lab", pid)
		}
	}
	for _, g := range groups {
		if _, err := os.Stat(g); err == nil {
			t.Errorf("cgroup %s survived the interrupted lab", g)
		}
	}
	if left := cgroupsOf(t, cmd.Process.Pid); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
}

// descendants returns the pids below pid in the process tree.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// The fields after the command name: state ppid ...
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	want := map[int]bool{pid: true}
	for changed := true; changed; {
		changed = false
		for p, pp := range parent {
			if want[pp] && !want[p] {
				want[p], changed = true, true
				out = append(out, p)
			}
		}
	}
	return out
}

// alive reports whether pid runs; a zombie waiting to be reaped is dead.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// cgroupsOf finds the sandbox's cgroups owned by pid: directories named
// "<pid>.<start>-..." below an "hlab" directory of a cgroup hierarchy.
func cgroupsOf(t *testing.T, pid int) []string {
	var out []string
	prefix := strconv.Itoa(pid) + "."
	filepath.WalkDir("/sys/fs/cgroup", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(path, "/") > 8 {
			return filepath.SkipDir
		}
		if strings.HasPrefix(d.Name(), prefix) && filepath.Base(filepath.Dir(path)) == "hlab" {
			out = append(out, path)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

func quotaAvailable() bool {
	_, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	_, err2 := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return (err == nil || err2 == nil) && os.Geteuid() == 0
}
