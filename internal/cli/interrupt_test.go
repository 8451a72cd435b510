package cli

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interruptHelperEnv makes this test binary the helper process of
// TestSecondInterruptExitsAtOnce.
const interruptHelperEnv = "HLAB_TEST_INTERRUPT_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(interruptHelperEnv) != "" {
		// A lab whose clean-up takes long: it waits 30 s once interrupted.
		ctx, stop := interruptible()
		defer stop()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("cleaning up")
		time.Sleep(30 * time.Second)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSecondInterruptExitsAtOnce: the first Ctrl-C starts the clean-up;
// a second one ends the process at once instead of waiting for it.
func TestSecondInterruptExitsAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), interruptHelperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	await := func(want string) {
		for lines.Scan() {
			if strings.Contains(lines.Text(), want) {
				return
			}
		}
		t.Fatalf("the helper never said %q", want)
	}
	await("ready")
	cmd.Process.Signal(os.Interrupt)
	await("cleaning up")
	// A person's second Ctrl-C comes well after the first took effect.
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("exit: %v; want death by the second SIGINT", err)
		}
		t.Logf("gone %v after the second Ctrl-C", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the second Ctrl-C did not end the process within 5 s: it waited for the clean-up")
	}
}
