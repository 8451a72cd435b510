package deps

import (
	"os"
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

// skipMissing skips t because what cannot run here (err says why), or
// fails it when HLAB_REQUIRE_DEPS is set, so that CI cannot pass by
// skipping.
func skipMissing(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("HLAB_REQUIRE_DEPS") != "" {
		t.Fatalf("%s cannot run here (HLAB_REQUIRE_DEPS is set): %v", what, err)
	}
	t.Skipf("%s cannot run here: %v", what, err)
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
