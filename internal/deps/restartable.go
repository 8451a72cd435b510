package deps

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// restartable is a dependency's server process, which tests may take
// down and bring back on the same data and ports (Cassandra, the real
// Kafka broker). It holds the current process, restarts one that died on its
// own, and tells a stop for a while from a stop for good.
type restartable struct {
	what        string        // "cassandra", "kafka": for errors
	stopTimeout time.Duration // SIGTERM, then SIGKILL after this
	errStopped  error         // what starting after a stop for good returns
	// launch starts the process and waits until it answers.
	launch func(ctx context.Context) (*sandbox.Process, error)

	mu      sync.Mutex
	proc    *sandbox.Process // nil while down
	stopped bool
}

// process returns the current process, nil while it is down.
func (r *restartable) process() *sandbox.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// startServer starts the process unless it runs (again after stopServer,
// or after it died) and waits until it answers.
func (r *restartable) startServer(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return r.errStopped
	}
	if r.proc != nil {
		select {
		case <-r.proc.Done(): // died on its own: start it again
			r.proc = nil
		default:
			return nil
		}
	}
	proc, err := r.launch(ctx)
	if err != nil {
		return err
	}
	r.proc = proc
	return nil
}

// stopServer stops the process, keeping its data and ports for startServer.
func (r *restartable) stopServer() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopProc()
}

func (r *restartable) stopProc() error {
	if r.proc == nil {
		return nil
	}
	p := r.proc
	r.proc = nil
	if err := p.Stop(r.stopTimeout); err != nil {
		return fmt.Errorf("deps: stop %s: %w", r.what, err)
	}
	return nil
}

// killServer SIGKILLs the process, as a crash would, keeping its data
// and ports for startServer.
func (r *restartable) killServer() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return nil
	}
	p := r.proc
	r.proc = nil
	if err := p.Kill(); err != nil {
		return fmt.Errorf("deps: kill %s: %w", r.what, err)
	}
	return nil
}

// stop stops the process for good, then runs cleanup (which removes its
// files). It is idempotent.
func (r *restartable) stop(cleanup func()) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	err := r.stopProc()
	cleanup()
	return err
}
