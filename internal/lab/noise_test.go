package lab

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/procfs"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// TestNoiseProbe: a busy loop outside the lab reads as outside CPU; the
// same loop in the lab's sandbox does not. Other tests may run beside
// this one and load the machine as much as the loop does, so each case
// is judged against the loop's own CPU time, read from /proc/<pid>/stat
// over the same interval, not against a quiet machine: the loop outside
// must be counted as outside (what others add only raises the reading),
// and the loop inside must be taken off the machine's busy time (what
// others add is in both).
func TestNoiseProbe(t *testing.T) {
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	loop := []string{"-c", "while :; do :; done"}
	// measure returns, over one second, the machine's busy CPU, the
	// probe's outside CPU and the loop's own CPU, in seconds.
	measure := func(start func() (pid int, stop func())) (busy, outside, loopCPU float64) {
		pid, stop := start()
		defer stop()
		time.Sleep(200 * time.Millisecond)
		from, fromLoop := probeNoise(sb), ticks(t, pid)
		time.Sleep(time.Second)
		to, toLoop := probeNoise(sb), ticks(t, pid)
		out, ok := to.outsideSince(from)
		if !ok {
			t.Fatal("no reading of /proc/stat")
		}
		wall := to.t.Sub(from.t).Seconds()
		return to.busy - from.busy, out * wall, float64(toLoop-fromLoop) / procfs.ClockTicks
	}
	inside := func() (int, func()) {
		p, err := sb.Start(context.Background(), sandbox.Spec{Name: "busy", Path: "/bin/sh", Args: loop})
		if err != nil {
			t.Fatal(err)
		}
		return p.PID(), func() { p.Stop(time.Second) }
	}
	outside := func() (int, func()) {
		cmd := exec.Command("/bin/sh", loop...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid, func() { cmd.Process.Kill(); cmd.Wait() }
	}
	// The loop must get enough of a core to tell it from the ticks'
	// rounding; a machine too busy to give it that gets another try.
	const enough = 0.3
	for try := range 3 {
		busyIn, outIn, loopIn := measure(inside)
		_, outOut, loopOut := measure(outside)
		t.Logf("try %d: loop in the sandbox %.2f s, machine busy %.2f s, outside %.2f s; loop outside %.2f s, outside %.2f s",
			try+1, loopIn, busyIn, outIn, loopOut, outOut)
		if loopIn < enough || loopOut < enough {
			continue
		}
		if outIn+0.8*loopIn > busyIn {
			t.Errorf("loop in the sandbox: outside %.2f s of %.2f s busy, want its %.2f s taken off", outIn, busyIn, loopIn)
		}
		if outOut < 0.8*loopOut {
			t.Errorf("loop outside: outside %.2f s, want at least 80%% of its %.2f s", outOut, loopOut)
		}
		return
	}
	t.Fatalf("the loop got less than %.1f s of CPU in a second, three times: the machine is too busy to judge", enough)
}

func ticks(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := procfs.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Ticks
}
