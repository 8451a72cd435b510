package refdatatest

import (
	"context"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/testkit"
)

// Run runs s (its replica following the database, when it has one) until
// the test ends, then closes it; it returns once s is ready (20 s at
// most).
func Run(t testing.TB, s refdata.Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; s.Close() })
	// Ready and fresh, as /readyz: a replica just loaded answers 503 until
	// its stream has caught up with the server and confirmed it.
	testkit.Eventually(t, 20*time.Second, "service ready and fresh", func() bool { return s.Ready() == nil && s.Fresh() == nil })
}
