package replica

import (
	"context"
	"sync"
)

// state is a table's readiness and the error that keeps it from being
// current. Sources set it; request handlers read it.
type state struct {
	mu      sync.Mutex
	ready   bool
	err     error
	readyCh chan struct{} // closed while ready
}

func (s *state) init() { s.readyCh = make(chan struct{}) }

// Ready reports whether the table holds current data: its snapshot is
// loaded and its change stream flows. It turns false while a source
// reconnects or resyncs (the table keeps serving its last data).
func (s *state) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

// Err returns why the table is not current (a broken stream, a failed
// resync, rows that fail to decode are not counted here), nil when it is.
// It is how errors in the source's goroutine reach request handlers.
func (s *state) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *state) setReady(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	ready := err == nil
	if ready == s.ready {
		return
	}
	s.ready = ready
	if ready {
		close(s.readyCh)
	} else {
		s.readyCh = make(chan struct{})
	}
}

func (s *state) waitReady(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.ready {
			s.mu.Unlock()
			return nil
		}
		ch := s.readyCh
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if err := s.Err(); err != nil {
				return err
			}
			return ctx.Err()
		}
	}
}
