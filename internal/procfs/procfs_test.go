package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses, as a process may choose.
	b := []byte("1234 (we ird) (x)) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 5555 1000 250\n")
	st, err := ParseStat(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{State: 'S', PPID: 1, PGRP: 1234, Ticks: 10, Start: 5555}
	if st != want {
		t.Errorf("ParseStat = %+v, want %+v", st, want)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) succeeded", bad)
		}
	}
	self, err := ReadStat(os.Getpid())
	if err != nil || self.PPID != os.Getppid() || self.Start == 0 || !self.Live() {
		t.Errorf("ReadStat(self) = %+v, %v", self, err)
	}
	if _, ok := All()[os.Getpid()]; !ok {
		t.Error("All() does not list this process")
	}
}

// TestAlive: a process that ran is alive; once it exited it is not,
// whether reaped or still a zombie.
func TestAlive(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Fatalf("sleep (pid %d) not alive", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := 0; Alive(pid); i++ { // a zombie until Wait: not alive
		if i > 1000 {
			t.Fatalf("pid %d alive after SIGKILL", pid)
		}
		exec.Command("true").Run()
	}
	cmd.Wait()
	if Alive(pid) || Alive(0) || Alive(-1) {
		t.Error("Alive true for a reaped pid, 0 or -1")
	}
}

func TestMountinfoAndCgroups(t *testing.T) {
	dir := t.TempDir()
	mi := filepath.Join(dir, "mountinfo")
	os.WriteFile(mi, []byte(`31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /mnt/with\040space rw,relatime - cgroup2 cgroup2 rw,nsdelegate
`), 0o644)
	mounts, err := ReadMountinfo(mi)
	if err != nil || len(mounts) != 4 {
		t.Fatalf("ReadMountinfo = %v, %v", mounts, err)
	}
	if m := mounts[1]; m.Point != "/sys/fs/cgroup/cpu,cpuacct" || m.FSType != "cgroup" || !slices.Contains(m.Opts, "cpuacct") {
		t.Errorf("cpu mount = %+v", m)
	}
	if m := mounts[3]; m.Point != "/mnt/with space" || m.FSType != "cgroup2" {
		t.Errorf("cgroup2 mount = %+v", m)
	}

	cg := filepath.Join(dir, "cgroup")
	os.WriteFile(cg, []byte("2:cpu,cpuacct:/\n4:memory:/docker/abc/x\n0::/user.slice/a.scope\n"), 0o644)
	lines, err := ReadCgroups(cg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ctrl, want string }{{"cpu", "/"}, {"cpuacct", "/"}, {"memory", "/docker/abc/x"}, {"", "/user.slice/a.scope"}} {
		if got, ok := CgroupPath(lines, tc.ctrl); !ok || got != tc.want {
			t.Errorf("CgroupPath(%q) = %q, %v; want %q", tc.ctrl, got, ok, tc.want)
		}
	}
	if _, ok := CgroupPath(lines, "pids"); ok {
		t.Errorf("CgroupPath found an absent controller")
	}
}
