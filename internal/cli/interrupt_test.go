package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/testkit"
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
	cmd, out := testkit.StartSelf(t, interruptHelperEnv+"=1")
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
	err := testkit.WaitExit(t, cmd, 5*time.Second, "the helper, waiting for its clean-up after the second Ctrl-C,")
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("exit: %v; want death by the second SIGINT", err)
	}
	t.Logf("gone %v after the second Ctrl-C", time.Since(start).Round(time.Millisecond))
}
