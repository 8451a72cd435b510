package loadgen

import (
	"errors"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// errAborted is what requests see after Run closed their connections because
// ctx was done; their results are discarded, never counted.
var errAborted = errors.New("loadgen: run aborted")

// connTracker dials the connections of one run, counts the bytes they carry,
// and closes them all when the run ends or ctx is done: closing the sockets
// is how requests in flight are aborted (a worker blocks in a read with no
// context to watch), and how no connection is left behind.
type connTracker struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool

	// Bytes of connections already closed; live ones keep their own count.
	bytesIn, bytesOut atomic.Int64
}

func newConnTracker() *connTracker {
	return &connTracker{conns: make(map[*trackedConn]struct{})}
}

// dial connects to addr before deadline; the client adds TLS on top when
// the target is https.
func (t *connTracker) dial(addr string, deadline time.Time) (net.Conn, error) {
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = c.Close()
		return nil, errAborted
	}
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

// closeAll closes every connection and refuses new ones.
func (t *connTracker) closeAll() {
	t.mu.Lock()
	t.closed = true
	conns := slices.Collect(maps.Keys(t.conns))
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// bytes returns the bytes read and written so far on all connections.
func (t *connTracker) bytes() (in, out int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in, out = t.bytesIn.Load(), t.bytesOut.Load()
	for c := range t.conns {
		in += c.in.Load()
		out += c.out.Load()
	}
	return in, out
}

type trackedConn struct {
	net.Conn
	t       *connTracker
	in, out atomic.Int64
	once    sync.Once
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *trackedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		// Counted under the lock so bytes() never sees them twice or not at
		// all; a Read racing with Close may still add a few after this.
		c.t.bytesIn.Add(c.in.Load())
		c.t.bytesOut.Add(c.out.Load())
		c.t.mu.Unlock()
	})
	return err
}
