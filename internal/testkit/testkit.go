// Package testkit holds the helpers that tests across hlab share, one
// name each:
//
//   - waiting: Eventually, EventuallyNil (polling, never a bare sleep),
//     Healthy (a service's /healthz);
//   - dependencies: SkipMissing (skip a test whose program is missing,
//     or fail it under HLAB_REQUIRE_DEPS);
//   - metrics: MetricSum and Family (from a Gatherer), Scrape and
//     SumFamily (from a server's /metrics, parsed by expfmt);
//   - serving: Listen, FreeAddr, Background (a Serve or Run until the test
//     ends, its error checked), Do and Get (a request and its whole
//     answer);
//   - processes: Binary and HlabBinary (a command built once per test
//     process; HlabBinary skips in -short mode), StartSelf (the test
//     binary as a helper child), WaitExit (a process's exit, within a
//     bound), SyncBuffer (output read while it is written), Schemathesis
//     (the pinned API tester scripts/install-deps.sh installs);
//   - network faults: Proxy (connections reset, refused, redirected);
//   - golden files: Golden (got against testdata, rewritten with -update).
//
// It imports no other hlab package but promtext (which imports none, and
// sums metrics the one way testkit's sums use), so the tests of any
// package, the sandbox's own included, may use it without an import
// cycle.
package testkit

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"
)

// Eventually polls cond until it holds, and fails t (naming what and how
// long it waited) once timeout has passed without it holding. It polls
// every 10 ms at first, backing off to every 50 ms: a quick condition is
// seen quickly, a costly one (a query, a request) is not hammered, and a
// state that lasts a fraction of a second is still caught. For what takes
// a while, never a bare sleep (nats' checkFor).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyNil(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// EventuallyNil is Eventually for a condition that says why it does not
// hold yet: it polls cond until it returns nil, and fails t with the last
// error once timeout has passed.
func EventuallyNil(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := 10 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if err == errNotYet {
				t.Fatalf("not within %v: %s", timeout, what)
			}
			t.Fatalf("not within %v: %s: %v", timeout, what, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// errNotYet is what Eventually's condition returns while it does not hold.
var errNotYet = notYet{}

type notYet struct{}

func (notYet) Error() string { return "not yet" }

// SyncBuffer is a bytes.Buffer safe for concurrent use: a process's
// output can be copied into it while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// SkipMissing skips t because what cannot run here (err says why, e.g.
// its program is not installed), or fails it when HLAB_REQUIRE_DEPS is
// set (make test sets it), so that CI cannot pass by skipping.
func SkipMissing(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("HLAB_REQUIRE_DEPS") != "" {
		t.Fatalf("%s cannot run here (HLAB_REQUIRE_DEPS is set): %v", what, err)
	}
	t.Skipf("%s cannot run here: %v", what, err)
}
