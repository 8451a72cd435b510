package backend

import (
	"fmt"
	"net"
	"syscall"
	"time"
)

// ConnectHole is a 127.0.0.1 address where connecting never completes: a
// socket listening with a backlog of one that nobody accepts from, its
// accept queue filled by connections of its own, so that the kernel drops
// further SYNs as a firewall that drops packets does (report E's "time
// curl example.com:81"). Only a connect timeout, or the caller giving up,
// ends a connect to it. It is a lab tool, for the process that owns it.
type ConnectHole struct {
	addr   string
	fd     int
	filled []net.Conn
}

// blackHoleFill bounds the connections spent filling the accept queue
// (Linux queues backlog+1), and blackHoleProbe how long a connect may
// take before the address counts as a black hole.
const (
	blackHoleFill  = 16
	blackHoleProbe = 200 * time.Millisecond
)

// ListenConnectHole opens a connect black hole on 127.0.0.1. It returns
// ErrNoConnectHole when the kernel kept completing connects (it queued them
// anyway, as some settings make it do): the caller cannot have one here.
func ListenConnectHole() (*ConnectHole, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("backend: black hole: %w", err)
	}
	b := &ConnectHole{fd: fd}
	if err := b.listen(); err != nil {
		b.Close()
		return nil, err
	}
	for range blackHoleFill {
		c, err := net.DialTimeout("tcp", b.addr, blackHoleProbe)
		if err != nil {
			return b, nil // this connect hung: the queue is full
		}
		b.filled = append(b.filled, c)
	}
	b.Close()
	return nil, fmt.Errorf("%w: %d connects to a listener nobody accepts from all completed", ErrNoConnectHole, blackHoleFill)
}

func (b *ConnectHole) listen() error {
	if err := syscall.Bind(b.fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("backend: black hole: bind: %w", err)
	}
	if err := syscall.Listen(b.fd, 0); err != nil {
		return fmt.Errorf("backend: black hole: listen: %w", err)
	}
	sa, err := syscall.Getsockname(b.fd)
	if err != nil {
		return fmt.Errorf("backend: black hole: %w", err)
	}
	b.addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	return nil
}

// Addr is the black hole's host:port.
func (b *ConnectHole) Addr() string { return b.addr }

// Close closes the listener and the connections that filled its queue:
// connects to the address are refused from then on. Closing twice does
// nothing (the descriptor's number may belong to another file by then).
func (b *ConnectHole) Close() error {
	for _, c := range b.filled {
		c.Close()
	}
	b.filled = nil
	if b.fd < 0 {
		return nil
	}
	fd := b.fd
	b.fd = -1
	return syscall.Close(fd)
}
