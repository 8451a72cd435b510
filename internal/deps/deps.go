// Package deps finds, starts, awaits and stops the real dependencies the
// lab and the tests need (Postgres, Kafka, Cassandra, Redis, nginx, the
// MongoDB stand-in, Prometheus), and names the embedded default that
// stands in when one is absent.
// Processes are started through the sandbox, so they are sampled and
// cleaned up like the services under test.
package deps

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
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
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("deps: bad readiness URL %q: %w", url, err)
	}
	client := &http.Client{Timeout: time.Second}
	return awaitReady(ctx, "the server at "+url, "did not answer 200", timeout, 50*time.Millisecond, exited, func(ctx context.Context) error {
		resp, err := client.Do(req.WithContext(ctx))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
}

// awaitReady calls ready every interval until it returns nil, ctx ends,
// timeout passes, or exited (when non-nil) closes: a process that died
// will never become ready. who names the server in errors ("redis at
// 127.0.0.1:6379"), notReady says what it failed to do within timeout
// ("did not answer PING"); both errors quote ready's last error.
func awaitReady(ctx context.Context, who, notReady string, timeout, interval time.Duration, exited <-chan struct{}, ready func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		last := ready(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deps: %s %s within %s (last: %v)", who, notReady, timeout, last)
		case <-exited:
			return fmt.Errorf("deps: %s exited before it was ready (last: %v)", who, last)
		case <-time.After(interval):
		}
	}
}

// program is a dependency's binary: how to find it and tell its version.
type program struct {
	name    string   // looked up on PATH
	places  []string // where else it may be (a PATH without sbin)
	missing error    // returned when it is nowhere
	// versionArgs make it print its version, which the first submatch of
	// version picks from the output.
	versionArgs []string
	version     *regexp.Regexp
}

// find returns the program's path and version ("unknown" when the output
// has none).
func (p program) find() (path, version string, err error) {
	if path, err = p.path(); err != nil {
		return "", "", err
	}
	out, err := exec.Command(path, p.versionArgs...).CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("deps: %s %s failed: %w: %s", path, strings.Join(p.versionArgs, " "), err, lastBytes(out, 200))
	}
	if m := p.version.FindSubmatch(out); m != nil {
		return path, string(m[1]), nil
	}
	return path, "unknown", nil
}

// path returns where the program is: on PATH, else the first of places
// that exists.
func (p program) path() (string, error) {
	if path, err := exec.LookPath(p.name); err == nil {
		return path, nil
	}
	for _, place := range p.places {
		if fileExists(place) {
			return place, nil
		}
	}
	return "", p.missing
}
