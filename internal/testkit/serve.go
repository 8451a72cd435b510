package testkit

import (
	"context"
	"net"
	"testing"
)

// Listen returns a TCP listener on a free loopback port, closed when the
// test ends if nothing has closed it before; it fails t when it cannot
// listen.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Background runs run in a goroutine until the test ends; then it cancels
// run's context, waits for run to return and fails t (naming what) if run
// returned an error. For a service's Serve or Run, which must return nil
// after a clean shutdown.
func Background(t testing.TB, what string, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}
