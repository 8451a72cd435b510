package loadgen

import (
	"time"

	"golang.org/x/sys/unix"
)

// The open model's event loop, for plain http on Linux with GOMAXPROCS <= 2.
//
// The dispatcher and its workers cost, per request, a hand-off over a
// channel, a wake-up of the worker, a blocking write through the netpoller
// and a read that finds nothing before the worker parks: at 50,000 req/s on
// one CPU that saturated it. Here one engine does what both did: it walks
// the pacer's intended send times, sends each due request on an idle
// connection (opening one when none is idle, up to the cap), and reads the
// answers as they arrive. When every connection is busy the due request
// waits for one and goes out late, as it does with the dispatcher; its
// latency counts from its intended time, and late sends, max lag and
// unsent requests are counted the same way.
//
// The epoll wait is in whole milliseconds, too coarse for sends 20 µs
// apart; a timerfd in the epoll set (edge-triggered, so it is never read:
// re-arming resets it) wakes the loop at the next intended send, within the
// kernel's timer slack, as the dispatcher's timerfdSleeper does.
//
// At 50,000 req/s for 10 s on one CPU, against a one-CPU fasthttp hello
// server, it used 0.74-0.82 of its CPU and sent 100% of the intended count
// with 4,700-27,000 sends late by over 10 ms; the dispatcher used all of its
// CPU (0.99) and sent 100% with 49,000-65,000 late (two alternating runs
// each). Against net/http's hello server, saturated at 0.99 CPU, both sent
// 88-95%: a server that cannot keep up holds every connection busy, up to
// the cap, and the sends then wait (bench/loadgen-vs-wrk.sh now gives the
// server's CPU beside each run for that reason).
//
// Pacing each send at its time, rather than in bursts, costs the server a
// wake-up per request at low rates: at 5,000 req/s the fasthttp server
// switched context 15,500 times a second under this loop and 3,400 under
// vegeta, whose sends bunch, and used 0.28 against 0.11 of a CPU.
//
// One difference: an idle connection the server closes is closed here at
// once, and the next send on it connects again; a worker finds it closed
// only when it sends, and counts that request as an error.

// sendGrid: the timerfd wakes the loop at multiples of it (offsets from the
// start), so a send is up to sendGrid late on top of the kernel's timer
// slack (50 µs by default). That is well under lateThreshold, and adds to
// the latency measured from the intended time, as any lag does.
const sendGrid = 50 * time.Microsecond

// startOpen prepares e for the open model, before run.
func (e *engine) startOpen() {
	e.open, e.sending = true, true
	fd, err := timerfdCreate()
	if err != nil {
		return // the wait rounds up to the next millisecond instead
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(fd), Pad: -1}
	if unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev) != nil {
		_ = unix.Close(int(fd))
		return
	}
	e.tfd = int(fd)
}

// sendDue sends every request whose intended time has come, while a
// connection is free for it, and ends sending when the run is over.
func (e *engine) sendDue() {
	r := e.r
	for e.sending {
		at, ok := r.intendedAt(e.n)
		if !ok || r.stopped.Load() {
			e.endSending()
			return
		}
		now := time.Since(r.start)
		if at > now {
			return
		}
		var c *econn
		switch {
		case len(e.idle) > 0:
			c = e.idle[len(e.idle)-1]
			e.idle = e.idle[:len(e.idle)-1]
		case len(e.conns) < r.c.conns:
			id := len(e.conns)
			c = &econn{idx: int32(id), fd: -1, sh: r.rec.shardFor(id)}
			e.conns = append(e.conns, c)
		default:
			return // all busy: the send waits for an answer, and is late
		}
		e.n++
		r.dispatched = e.n
		r.sentLate(now - at)
		e.send(c, at, now)
	}
}

// endSending ends the sends; the loop runs on until the answers in flight
// are in. Stopping the runner records when sending ended, for the count of
// unsent requests.
func (e *engine) endSending() {
	e.sending = false
	e.r.stop()
	if e.tfd >= 0 && e.armed >= 0 {
		_ = timerfdSet(e.tfd, 0)
		e.armed = -1
	}
}

// sendWait returns how long the loop may wait before the next send is due,
// arming the timerfd for it when the wait is shorter than a millisecond
// would be precise for. It returns engineWait when no send can go out
// before an answer comes in.
func (e *engine) sendWait(now time.Duration) time.Duration {
	r := e.r
	if !e.sending || (len(e.idle) == 0 && len(e.conns) >= r.c.conns) {
		return engineWait
	}
	at := r.c.pacer.At(e.n)
	d := at - now
	if d <= 0 {
		return 0
	}
	if e.tfd < 0 {
		return d // rounded up to whole milliseconds
	}
	// Arming the timer costs a few microseconds (in a VM, a trap to the
	// hypervisor), as much as a send: wake on a grid of sendGrid, so that
	// at high rates one wake-up sends several requests and the timer is
	// armed once for them.
	at = (at + sendGrid - 1) / sendGrid * sendGrid
	if e.armed != at {
		d = at - now
		if timerfdSet(e.tfd, d) != nil {
			return d
		}
		e.armed = at
	}
	return engineWait
}
