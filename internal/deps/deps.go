// Package deps finds, starts, awaits and stops the real dependencies the
// lab and the tests need (nginx now; Postgres, Kafka, Cassandra, Redis
// later), and names the embedded default that stands in when one is absent.
// Processes are started through the sandbox, so they are sampled and
// cleaned up like the services under test.
package deps

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Another process can take it before the caller binds it: to start a
// server, use OnFreePorts, which tries again on new ports.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("deps: no free port on 127.0.0.1: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// AwaitHTTP polls url until it answers 200, ctx ends, or timeout passes.
// exited, when non-nil, aborts the wait early: a process that died will
// never become ready.
func AwaitHTTP(ctx context.Context, url string, timeout time.Duration, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("deps: bad readiness URL %q: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("status %s", resp.Status)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deps: %s not ready after %s (last: %v)", url, timeout, last)
		case <-exited:
			return fmt.Errorf("deps: the process behind %s exited before it was ready (last: %v)", url, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
