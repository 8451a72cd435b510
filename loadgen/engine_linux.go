package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The closed model's event loop, for plain http on Linux: what wrk does.
// (The open model's use of it is in engine_open_linux.go.)
//
// A goroutine per connection costs, per request, a park and a wake-up
// through Go's netpoller (and a read that finds nothing yet, before the
// park): with one CPU that took about 1.3x wrk's CPU per request. Here one
// goroutine per engine owns its connections as raw non-blocking sockets in
// its own epoll set (level-triggered, registered once): per request one
// write of the request, serialized once for the run, and usually one read
// of the answer, which respParser frames as it arrives and reads whole.
// Engines: GOMAXPROCS-1 (at least 1, at most one per connection), each
// with its share of the connections, so with one or two CPUs there is one,
// like wrk -t1.
//
// What stays as with the goroutine per connection: dialing, status and
// error counting (the same kinds: the errors are the same syscall errors,
// os.ErrDeadlineExceeded for a timeout, io.EOF for a connection closed
// before the first byte of an answer), the timeout from the send to the
// last byte, bytes counted, in-flight requests finished at the end, and on
// ctx done everything closed and nothing more counted.

// engineWait bounds each epoll wait, so that a stop or an abort is seen
// within it even when nothing arrives.
const engineWait = 10 * time.Millisecond

type engine struct {
	r      *runner
	epfd   int
	sa     unix.Sockaddr
	family int
	req    []byte // the request, as sent
	head   bool
	conns  []*econn
	ready  []*econn // connections whose next request is due
	active int      // connections not finished
	buf    []byte
	events []unix.EpollEvent
	// nextExpire is the earliest deadline of the requests in flight when
	// they were last scanned. Every request gets the same timeout, so a
	// request sent since has a later deadline: the true earliest is never
	// before it, and the connections need scanning only once it passed.
	nextExpire time.Duration
	lastYield  time.Duration
	busy       int // requests in flight

	// Open model (see engine_open_linux.go): one engine, whose connections
	// are opened as the sends need them, up to the cap.
	open    bool
	sending bool          // requests remain to be sent
	n       uint64        // the next request to send
	idle    []*econn      // connected or not, with no request in flight
	tfd     int           // a timerfd in the epoll set, -1 if none
	armed   time.Duration // when tfd fires; -1 if not armed

	bytesIn, bytesOut int64
}

type econn struct {
	idx        int32 // in its engine's conns, carried in its epoll events
	fd         int   // -1: not connected
	sh         *shard
	connecting bool
	wantOut    bool // EPOLLOUT registered
	written    int  // bytes of the request written
	got        int  // bytes of the answer read
	inFlight   bool
	intended   time.Duration // offsets from the run's start
	sent       time.Duration
	deadline   time.Duration
	p          respParser
	pending    []byte // read but not yet consumed by p
}

// runEngines runs the load on event loops and reports whether it could;
// when it cannot (TLS, a scenario, the Goroutines option, a host that does
// not resolve to an address, or the open model with GOMAXPROCS > 2), the
// caller runs the goroutines instead.
func (r *runner) runEngines() bool {
	c := r.c
	if c.isTLS || c.scenario != nil || c.goroutines {
		return false
	}
	// Each engine holds a P while it waits (see wait): leave one to the
	// rest of the process when there are several.
	procs := runtime.GOMAXPROCS(0)
	if c.open && procs > 2 {
		// The open model runs on one engine, which drives one CPU: with
		// more, the goroutines spread the sends over them.
		return false
	}
	addr, ok := engineAddr(c)
	if !ok {
		return false
	}
	// One per engine: unix.Connect writes into it.
	sockaddr := func() (unix.Sockaddr, int) {
		if ip4 := addr.IP.To4(); ip4 != nil {
			sa := &unix.SockaddrInet4{Port: addr.Port}
			copy(sa.Addr[:], ip4)
			return sa, unix.AF_INET
		}
		sa := &unix.SockaddrInet6{Port: addr.Port}
		copy(sa.Addr[:], addr.IP.To16())
		return sa, unix.AF_INET6
	}
	req := r.newRequest()
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := req.Write(w); err != nil || w.Flush() != nil {
		return false
	}
	head := req.Header.IsHead()

	n := min(max(procs-1, 1), c.conns)
	if c.open {
		n = 1
	}
	engines := make([]*engine, n)
	for i := range engines {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			for _, e := range engines[:i] {
				_ = unix.Close(e.epfd)
			}
			return false
		}
		sa, family := sockaddr()
		engines[i] = &engine{r: r, epfd: epfd, sa: sa, family: family, req: b.Bytes(), head: head,
			buf: make([]byte, bufSize), events: make([]unix.EpollEvent, 128), tfd: -1, armed: -1}
	}
	if c.open {
		engines[0].startOpen()
		engines[0].run()
		return true
	}
	for id := range c.conns {
		e := engines[id%n]
		e.conns = append(e.conns, &econn{idx: int32(len(e.conns)), fd: -1, sh: r.rec.shardFor(id)})
	}
	for _, e := range engines {
		r.workers.Go(e.run)
	}
	r.workers.Wait()
	return true
}

// engineAddr returns the address the loops connect to. A host name may
// resolve to several (localhost: ::1 and 127.0.0.1) of which only some
// listen; Go's dialer tries them in turn, so one dial through it finds the
// one that answers. When none does, the goroutines per connection run,
// and count the errors as they always have.
func engineAddr(c *cfg) (*net.TCPAddr, bool) {
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return nil, false
	}
	if net.ParseIP(host) != nil {
		addr, err := net.ResolveTCPAddr("tcp", c.addr)
		return addr, err == nil
	}
	conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
	if err != nil {
		return nil, false
	}
	defer conn.Close()
	addr, ok := conn.RemoteAddr().(*net.TCPAddr)
	return addr, ok
}

func (e *engine) run() {
	defer func() {
		for _, c := range e.conns {
			e.closeConn(c)
		}
		_ = unix.Close(e.epfd)
		if e.tfd >= 0 {
			_ = unix.Close(e.tfd)
		}
		e.r.tracker.bytesIn.Add(e.bytesIn)
		e.r.tracker.bytesOut.Add(e.bytesOut)
	}()
	e.active = len(e.conns)
	e.ready = append(e.ready, e.conns...)
	for {
		if e.open {
			e.sendDue()
		}
		// A request that fails at once (a refused connection) makes its
		// connection ready again: sending from here, not from where it
		// failed, keeps that a loop rather than a recursion.
		for len(e.ready) > 0 {
			if e.r.aborted.Load() {
				return // in-flight requests are dropped, not counted
			}
			c := e.ready[len(e.ready)-1]
			e.ready = e.ready[:len(e.ready)-1]
			e.next(c)
		}
		if e.r.aborted.Load() || (!e.open && e.active == 0) || (e.open && !e.sending && e.busy == 0) {
			return
		}
		n, err := e.wait()
		if err != nil && !errors.Is(err, unix.EINTR) {
			// Cannot happen with valid arguments; fail what is in flight
			// rather than spin.
			for _, c := range e.conns {
				if c.inFlight {
					e.fail(c, err)
				}
			}
			continue
		}
		if e.r.aborted.Load() {
			return
		}
		for _, ev := range e.events[:max(n, 0)] {
			if ev.Pad < 0 {
				e.armed = -1 // the send timer fired
				continue
			}
			c := e.conns[ev.Pad]
			if c.fd < 0 || int32(c.fd) != ev.Fd {
				continue // an event of a connection closed since
			}
			if !c.inFlight {
				// Open model: the server closed an idle connection (or
				// sent what was not asked for). Level-triggered, the
				// event would come back on every wait; the next send on
				// c connects again.
				e.closeConn(c)
				continue
			}
			e.handle(c, ev.Events)
		}
		e.expire()
	}
}

// wait waits for events until the earliest deadline, at most engineWait.
//
// It makes the epoll_wait as a raw system call, holding on to its P. With
// the runtime's own system call entry, the runtime's monitor thread, seeing
// a P blocked in a system call, takes it back every 20 µs and keeps waking
// up at that pace: with one connection on one CPU that cost a quarter more
// CPU per request. (Waiting in Go's netpoller for the epoll set to become
// readable cost more still: a park, a wake-up and an empty epoll_wait per
// wait.) So that the rest of the process is not starved, the engines
// leave a P free when there are several, and the loop yields its P at
// least every millisecond while it runs. With GOMAXPROCS=1 the rest of the
// process may wait up to engineWait while the loop blocks: a server in the
// same process then answers late (capping a wait at a millisecond instead
// cost a fifth more CPU per request); the Goroutines option is for that.
// A signal (preemption for the garbage collector) ends a wait early with
// EINTR.
func (e *engine) wait() (int, error) {
	now := time.Since(e.r.start)
	if now-e.lastYield >= time.Millisecond {
		e.lastYield = now
		runtime.Gosched()
	}
	wait := min(engineWait, e.nextExpire-now)
	if e.open {
		wait = min(wait, e.sendWait(now))
	}
	ms := max(int((wait+time.Millisecond-1)/time.Millisecond), 0)
	r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(e.epfd),
		uintptr(unsafe.Pointer(&e.events[0])), uintptr(len(e.events)), uintptr(ms), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// expire fails the requests whose timeout passed, and finds the next
// deadline.
func (e *engine) expire() {
	now := time.Since(e.r.start)
	if now < e.nextExpire {
		return
	}
	next := now + e.r.c.timeout
	for _, c := range e.conns {
		if !c.inFlight {
			continue
		}
		if now >= c.deadline {
			e.fail(c, os.ErrDeadlineExceeded)
		} else {
			next = min(next, c.deadline)
		}
	}
	e.nextExpire = next
}

// next sends c's next request, or finishes c when the run is over, as a
// closed-model worker does. Only the loop calls it, for a ready connection.
func (e *engine) next(c *econn) {
	r := e.r
	sent := time.Since(r.start)
	if r.stopped.Load() || (r.c.durSet && sent >= r.c.duration) || (r.c.reqSet && r.issued.Add(1) > r.c.requests) {
		e.closeConn(c)
		e.active--
		return
	}
	e.send(c, sent, sent)
}

// send sends a request on c, intended at intended and sent now (offsets
// from the start), connecting c first if it is not connected.
func (e *engine) send(c *econn, intended, sent time.Duration) {
	c.inFlight, c.intended, c.sent, c.deadline = true, intended, sent, sent+e.r.c.timeout
	e.busy++
	c.written, c.got = 0, 0
	c.p.reset(e.head)
	c.pending = c.pending[:0]
	if c.fd < 0 {
		if err := e.connect(c); err != nil {
			e.fail(c, err)
			return
		}
		if c.connecting {
			return
		}
	}
	e.write(c)
}

func (e *engine) connect(c *econn) error {
	fd, err := unix.Socket(e.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	c.fd = fd
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd), Pad: c.idx}
	err = unix.Connect(fd, e.sa)
	switch {
	case err == nil:
	case errors.Is(err, unix.EINPROGRESS):
		c.connecting, c.wantOut = true, true
		ev.Events |= unix.EPOLLOUT
	default:
		e.closeConn(c)
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		e.closeConn(c)
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// setOut registers or drops interest in writability.
func (e *engine) setOut(c *econn, on bool) error {
	if c.wantOut == on {
		return nil
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd), Pad: c.idx}
	if on {
		ev.Events |= unix.EPOLLOUT
	}
	if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	c.wantOut = on
	return nil
}

func (e *engine) handle(c *econn, events uint32) {
	if c.connecting {
		if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		errno, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && errno != 0 {
			err = unix.Errno(errno)
		}
		if err != nil {
			e.fail(c, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)})
			return
		}
		c.connecting = false
		e.write(c)
		return
	}
	if c.written < len(e.req) && events&unix.EPOLLOUT != 0 {
		e.write(c)
		if c.fd < 0 || !c.inFlight {
			return
		}
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.read(c)
	}
}

func (e *engine) write(c *econn) {
	for c.written < len(e.req) {
		n, err := unix.Write(c.fd, e.req[c.written:])
		if n > 0 {
			c.written += n
			e.bytesOut += int64(n)
		}
		if errors.Is(err, unix.EAGAIN) {
			if err := e.setOut(c, true); err != nil {
				e.fail(c, err)
			}
			return
		}
		if err != nil {
			e.fail(c, os.NewSyscallError("write", err))
			return
		}
	}
	if err := e.setOut(c, false); err != nil {
		e.fail(c, err)
	}
}

func (e *engine) read(c *econn) {
	n, err := unix.Read(c.fd, e.buf)
	switch {
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		return
	case err != nil:
		if c.got == 0 {
			// As fasthttp does: any failure before the first byte of an
			// answer is the connection closed under the request.
			e.fail(c, io.EOF)
		} else {
			e.fail(c, os.NewSyscallError("read", err))
		}
		return
	case n == 0:
		switch {
		case c.p.eof():
			e.done(c, true)
		case c.got == 0:
			e.fail(c, io.EOF)
		default:
			e.fail(c, io.ErrUnexpectedEOF)
		}
		return
	}
	c.got += n
	e.bytesIn += int64(n)
	data := e.buf[:n]
	if len(c.pending) > 0 {
		c.pending = append(c.pending, data...)
		data = c.pending
	}
	used, done, err := c.p.feed(data)
	if err != nil {
		e.fail(c, err)
		return
	}
	if done {
		// Bytes after the answer were never asked for: a confused server.
		e.done(c, c.p.close || used < len(data))
		return
	}
	c.pending = append(c.pending[:0], data[used:]...)
}

// done records c's answer and makes c ready for its next request.
func (e *engine) done(c *econn, closeConn bool) {
	e.record(c, c.p.status, nil)
	if closeConn {
		e.closeConn(c)
	}
	e.release(c)
}

// release makes c ready for its next request: at once in the closed
// model, at the next due send in the open one.
func (e *engine) release(c *econn) {
	if e.open {
		e.idle = append(e.idle, c)
		return
	}
	e.ready = append(e.ready, c)
}

// fail records c's request as failed with err, closes the connection (the
// next request dials a new one) and makes c ready for its next request.
func (e *engine) fail(c *econn, err error) {
	e.record(c, 0, err)
	e.closeConn(c)
	e.release(c)
}

func (e *engine) record(c *econn, status int, err error) {
	c.inFlight = false
	e.busy--
	end := time.Since(e.r.start)
	if err != nil && e.r.aborted.Load() {
		return
	}
	c.sh.record(c.intended, c.sent, end, status, err)
}

func (e *engine) closeConn(c *econn) {
	if c.fd >= 0 {
		_ = unix.Close(c.fd) // also drops it from the epoll set
		c.fd = -1
	}
	c.connecting, c.wantOut = false, false
}
