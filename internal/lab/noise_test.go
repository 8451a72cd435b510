package lab

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// TestNoiseProbe: a busy loop outside the lab reads as outside CPU; the
// same loop in the lab's sandbox does not. Other tests may run beside
// this one and add to both readings, so it compares them, and gives the
// machine three tries.
func TestNoiseProbe(t *testing.T) {
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	loop := []string{"-c", "while :; do :; done"}
	measure := func(start func() (stop func())) float64 {
		stop := start()
		defer stop()
		time.Sleep(200 * time.Millisecond)
		from := probeNoise(sb)
		time.Sleep(time.Second)
		out, ok := probeNoise(sb).outsideSince(from)
		if !ok {
			t.Fatal("no reading of /proc/stat")
		}
		return out
	}
	inside := func() func() {
		p, err := sb.Start(context.Background(), sandbox.Spec{Name: "busy", Path: "/bin/sh", Args: loop})
		if err != nil {
			t.Fatal(err)
		}
		return func() { p.Stop(time.Second) }
	}
	outside := func() func() {
		cmd := exec.Command("/bin/sh", loop...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return func() { cmd.Process.Kill(); cmd.Wait() }
	}
	var in, out float64
	for range 3 {
		in, out = measure(inside), measure(outside)
		if out >= 0.7 && out-in >= 0.5 {
			t.Logf("outside CPU with the loop in the sandbox %.2f cores, outside it %.2f", in, out)
			return
		}
	}
	t.Errorf("outside CPU with the loop in the sandbox %.2f cores, outside it %.2f: want the loop seen outside only", in, out)
}
