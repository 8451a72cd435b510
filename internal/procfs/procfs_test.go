package procfs

import (
	"os"
	"os/exec"
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
