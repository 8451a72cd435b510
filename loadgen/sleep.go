package loadgen

import "time"

// A sleeper lets the open model's dispatcher wait for the next intended send
// time. wake, callable from any goroutine, makes the current and every later
// sleepUntil return false at once.
type sleeper interface {
	sleepUntil(t time.Time) bool
	wake()
	close()
}

// timerSleeper uses a runtime timer. Go's netpoller sleeps in whole
// milliseconds when the process is idle, so it wakes up to about 1 ms late;
// newSleeper prefers something sharper where the platform has it.
type timerSleeper struct {
	t    *time.Timer
	stop chan struct{}
	done bool // stop closed; guarded by the caller of wake (once)
}

func newTimerSleeper() *timerSleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &timerSleeper{t: t, stop: make(chan struct{})}
}

func (s *timerSleeper) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-s.stop:
			return false
		default:
			return true
		}
	}
	s.t.Reset(d)
	select {
	case <-s.t.C:
		return true
	case <-s.stop:
		return false
	}
}

func (s *timerSleeper) wake() {
	if !s.done {
		s.done = true
		close(s.stop)
	}
}

func (s *timerSleeper) close() { s.t.Stop() }
