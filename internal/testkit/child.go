package testkit

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// StartSelf starts this test binary again, running no test, with env
// ("NAME=value") added to the environment: a TestMain that finds one of
// its variables set runs a helper (a consumer, a server) in the child
// instead. It returns the child, already started, and its standard
// output; its standard error is this process's. The caller ends it.
func StartSelf(t testing.TB, env ...string) (*exec.Cmd, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// WaitExit waits (timeout at most) for cmd, started, to exit and returns
// what cmd.Wait returned. It fails t, naming what, when cmd still runs
// after timeout; the caller kills it (a deferred cmd.Process.Kill).
func WaitExit(t testing.TB, cmd *exec.Cmd, timeout time.Duration, what string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", what, timeout)
		return nil
	}
}
