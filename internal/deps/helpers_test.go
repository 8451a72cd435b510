package deps

import (
	"testing"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// testSandbox returns a new sandbox for t's servers, closed when t ends.
func testSandbox(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// mustStop stops a server with stop and fails t unless proc, its
// process, has exited by the time stop returns.
func mustStop(t testing.TB, what string, proc *sandbox.Process, stop func() error) {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Done():
	default:
		t.Fatalf("%s still runs after Stop", what)
	}
}
