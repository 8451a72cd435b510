package testkit

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
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

// Healthy waits (timeout at most) until GET url answers 200 OK, as a
// service's /healthz does once it serves.
func Healthy(t testing.TB, timeout time.Duration, url string) {
	t.Helper()
	EventuallyNil(t, timeout, url+" answers 200", func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
}

// FreeAddr returns a loopback address that was free a moment ago, for a
// process the test starts to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Do sends req, reads its whole answer and closes it; it fails t when no
// answer comes (within 30 s) or it cannot be read. The response's Body is
// closed: body is what it held.
func Do(t testing.TB, req *http.Request) (resp *http.Response, body string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL, err)
	}
	return resp, string(b)
}

// Get is Do of GET url.
func Get(t testing.TB, url string) (resp *http.Response, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Do(t, req)
}
