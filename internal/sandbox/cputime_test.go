package sandbox

import (
	"context"
	"testing"
	"time"
)

func TestCPUTimeAtExit(t *testing.T) {
	s := newSandboxT(t)
	p, err := s.Start(context.Background(), helperSpec("spin", "spin", nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.CPUTime(); ok {
		t.Fatal("CPUTime ok while the process runs: want it only once it exited")
	}
	time.Sleep(500 * time.Millisecond)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	cpu, ok := p.CPUTime()
	// Half a second of a busy loop: at least a tenth of it on a busy machine.
	if !ok || cpu < 50*time.Millisecond || cpu > 2*time.Second {
		t.Fatalf("CPUTime %v (ok %v) after ~0.5 s of a busy loop", cpu, ok)
	}
	t.Logf("CPU time of ~0.5 s spinning: %v", cpu)
}
