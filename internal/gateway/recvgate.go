package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"
)

// The bytes a client sends count against MaxGatewayBytes before they
// arrive, not after. gRPC reads a message into memory as it comes: a
// stream inside Recv is granted HTTP/2 flow-control credit for its whole
// next message (up to MaxRecvBytes) as soon as the message's length is
// known, whatever the gateway holds. Checked only before Recv, the budget
// was no bound: N streams each sending a large batch at once brought N
// times MaxRecvBytes into memory.
//
// gRPC has no hook between a message's length and its bytes, but the
// credit travels as a frame the server writes: a stream WINDOW_UPDATE
// larger than the stream window is such a grant, of exactly the message's
// length (replenishment is at most a quarter of the window and a frame).
// A gatedConn, between gRPC and
// the connection (after TLS), writes a grant only once the budget has
// room for it, and holds it back until then: that one stream waits,
// HTTP/2 flow control keeps its client from sending, and the
// connection's other streams go on. The bytes are counted off when gRPC
// has read the message (stats.InPayload, by its length on the wire), when
// the stream ends, or when the connection closes. A message no larger
// than the stream window is not counted: gRPC may grant it credit after
// it has arrived whole, so its InPayload could come before its grant; what
// a connection can bring that way is bounded by its streams times twice
// the window.
//
// A client that is granted a message and does not send it holds budget
// others need: a grant not read within slowSender of it is taken as such
// a client, and its connection is closed.

// slowSender is how long a granted message of n bytes may take to arrive:
// slowSenderBase, plus a second per MiB.
func slowSender(n int64) time.Duration { return slowSenderBase + time.Duration(n>>20)*time.Second }

// slowSenderBase is 30 s; tests shorten it.
var slowSenderBase = 30 * time.Second

// HTTP/2 frames, as far as the gate reads them (RFC 9113).
const (
	frameHeaderLen    = 9
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	flagEndStream     = 0x1
	windowUpdateLen   = frameHeaderLen + 4
	clientPrefaceLen  = len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
)

// recvGate admits the messages of every connection of one server against
// the gateway's bytes budget.
type recvGate struct {
	budget *budget
	// threshold is the stream window: a grant above it is a message the
	// client cannot have sent before the grant reached it, so that gRPC
	// reads it (InPayload) after the grant is counted.
	threshold uint32
	log       *slog.Logger
	slow      func(int64) time.Duration

	heldGrants    prometheus.Gauge
	receivedBytes prometheus.Gauge
	slowClosed    prometheus.Counter

	mu    sync.Mutex
	conns map[string]*gatedConn // by local and remote address
}

func newRecvGate(b *budget, window int32, reg prometheus.Registerer, log *slog.Logger) *recvGate {
	g := &recvGate{
		budget: b, threshold: uint32(window), log: log, slow: slowSender,
		conns: map[string]*gatedConn{},
		heldGrants: prometheus.NewGauge(prometheus.GaugeOpts{Name: "databus_receive_grants_held",
			Help: "Messages a client may not send yet: their bytes do not fit in --max-gateway-bytes."}),
		receivedBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "databus_receive_bytes_granted",
			Help: "Bytes of large messages clients may send now or are sending, counted in --max-gateway-bytes."}),
		slowClosed: prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_slow_sender_closes_total",
			Help: "Connections closed because a message they were granted did not arrive in time (30 s plus a second per MiB)."}),
	}
	registerOrReuse(reg, &g.heldGrants)
	registerOrReuse(reg, &g.receivedBytes)
	registerOrReuse(reg, &g.slowClosed)
	return g
}

// registerOrReuse registers *c, or takes the collector registered
// already under its name (several servers of one process may share a
// registry).
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c *C) {
	if err := reg.Register(*c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			*c = are.ExistingCollector.(C)
		}
	}
}

// run closes the connections of slow senders until ctx ends.
func (g *recvGate) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	// The connections to look at, a slice reused from tick to tick: made
	// anew each second it was 80 KB of garbage a second at 10,000
	// connections.
	var conns []*gatedConn
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			g.mu.Lock()
			for _, c := range g.conns {
				conns = append(conns, c)
			}
			g.mu.Unlock()
			for _, c := range conns {
				if stream, n, late := c.late(now); late {
					g.slowClosed.Inc()
					g.log.Warn("databus: closed a connection whose client did not send a message it announced in time", "remote", c.RemoteAddr().String(), "stream", stream, "bytes", n)
					c.Close()
				}
			}
			clear(conns) // hold no closed connection until the next tick
			conns = conns[:0]
		}
	}
}

func connKey(local, remote net.Addr) string { return local.String() + "|" + remote.String() }

// gateConn gates conn; grpc reads and writes through what it returns: a
// readyConn over a socket (readyconn.go), the gatedConn in the same
// allocation, else a gatedConn.
func (g *recvGate) gateConn(conn net.Conn) net.Conn {
	if raw := rawConnOf(conn); raw != nil {
		r := &readyConn{raw: raw}
		r.readFn = r.read // made once: a method value per read would allocate
		g.add(&r.gatedConn, conn)
		return r
	}
	return g.wrap(conn)
}

// wrap gates conn as a gatedConn.
func (g *recvGate) wrap(conn net.Conn) *gatedConn {
	c := &gatedConn{}
	g.add(c, conn)
	return c
}

// add makes c the gate's connection over conn. Its map of grants is made
// at its first grant: most connections never have one (only messages
// larger than the stream window do).
func (g *recvGate) add(c *gatedConn, conn net.Conn) {
	c.Conn, c.gate, c.key = conn, g, connKey(conn.LocalAddr(), conn.RemoteAddr())
	c.inSkip = clientPrefaceLen
	c.done, c.away = make(chan struct{}), make(chan struct{})
	g.mu.Lock()
	g.conns[c.key] = c
	g.mu.Unlock()
}

func (g *recvGate) lookup(local, remote net.Addr) *gatedConn {
	if local == nil || remote == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conns[connKey(local, remote)]
}

// grant is a message's bytes, counted in the budget, that gRPC has not read.
type grant struct {
	n  int64
	at time.Time
}

// heldGrant is a WINDOW_UPDATE frame not written yet.
type heldGrant struct {
	seq    uint64
	stream uint32
	n      int64
	frame  [windowUpdateLen]byte
}

// gatedConn is a server connection whose message grants wait for the
// budget. gRPC's loopy writer is its only writer, but for the grants it
// writes later itself, between frames.
type gatedConn struct {
	net.Conn
	gate *recvGate
	key  string

	// Incoming frames, read for the client's RST_STREAM: inSkip bytes
	// to pass over (the preface, a frame's payload), inHdr a header read
	// in part.
	inSkip int
	inHdr  [frameHeaderLen]byte
	inN    uint8 // beside inHdr: a byte, not a word of padding

	// Outgoing frames: wmu orders writes; outSkip is what is left of the
	// current frame's payload; carry a frame header (or a WINDOW_UPDATE
	// frame) that a write ended in the middle of, written with the next;
	// ready the grants admitted while a frame was half written.
	wmu     sync.Mutex
	outSkip int
	carry   []byte
	ready   [][windowUpdateLen]byte

	mu        sync.Mutex
	granted   map[uint32][]grant // by stream, oldest first; nil until the first grant
	held      []heldGrant        // oldest first
	seq       uint64
	injecting bool
	closed    bool
	done      chan struct{}
	closeOnce sync.Once

	// away is closed when gRPC sends the client a GOAWAY (moving.go);
	// pubs are the publish streams then ended, a list through their
	// connPrev and connNext (no allocation per stream), under mu.
	away     chan struct{}
	awayOnce sync.Once
	pubs     *publisher
}

// Read reads from the connection, noting the streams the client resets.
func (c *gatedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.readFrames(p[:n])
	return n, err
}

// readFrames follows the frames the client sent in b, the next bytes read
// from the connection, and notes the streams it resets.
func (c *gatedConn) readFrames(b []byte) {
	for len(b) > 0 {
		if c.inSkip > 0 {
			k := min(c.inSkip, len(b))
			c.inSkip -= k
			b = b[k:]
			continue
		}
		k := copy(c.inHdr[c.inN:], b)
		c.inN += uint8(k)
		b = b[k:]
		if c.inN < frameHeaderLen {
			break
		}
		c.inN = 0
		length, typ, _, stream := parseFrameHeader(c.inHdr[:])
		if typ == frameRSTStream {
			c.streamEnded(stream)
		}
		c.inSkip = length
	}
}

func parseFrameHeader(h []byte) (length int, typ, flags byte, stream uint32) {
	return int(h[0])<<16 | int(h[1])<<8 | int(h[2]), h[3], h[4], binary.BigEndian.Uint32(h[5:9]) & 0x7fffffff
}

// Write writes what gRPC writes, but for the message grants the budget has
// no room for yet, which it holds back; and notes the streams gRPC ends.
func (c *gatedConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	data := p
	if len(c.carry) > 0 {
		data = append(c.carry, p...)
		c.carry = nil
	}
	// out is data itself unless a frame is held back: then the bytes
	// around it, copied.
	var out []byte
	held := false
	start := 0
scan:
	for i := 0; i < len(data); {
		if c.outSkip > 0 {
			k := min(c.outSkip, len(data)-i)
			c.outSkip -= k
			i += k
			continue
		}
		rest := data[i:]
		if len(rest) < frameHeaderLen {
			c.carry = append([]byte(nil), rest...)
			data = data[:i]
			break scan
		}
		length, typ, flags, stream := parseFrameHeader(rest)
		switch {
		case typ == frameWindowUpdate && length == 4 && stream != 0:
			if len(rest) < windowUpdateLen {
				c.carry = append([]byte(nil), rest...)
				data = data[:i]
				break scan
			}
			inc := binary.BigEndian.Uint32(rest[frameHeaderLen:windowUpdateLen]) & 0x7fffffff
			if inc > c.gate.threshold && !c.admit(stream, int64(inc), rest[:windowUpdateLen]) {
				out = append(out, data[start:i]...)
				held = true
				start = i + windowUpdateLen
			}
			i += windowUpdateLen
			continue
		case typ == frameRSTStream, typ == frameHeaders && flags&flagEndStream != 0:
			c.streamEnded(stream)
		case typ == frameGoAway:
			c.awayOnce.Do(func() { close(c.away); go c.movePublishers() }) // moving.go
		}
		i += frameHeaderLen
		c.outSkip = length
	}
	if held {
		out = append(out, data[start:]...)
	} else {
		out = data
	}
	if len(out) > 0 {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
	}
	if err := c.writeReady(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeReady writes the grants admitted meanwhile, if no frame is half
// written. The caller holds wmu.
func (c *gatedConn) writeReady() error {
	if c.outSkip > 0 || len(c.carry) > 0 || len(c.ready) == 0 {
		return nil
	}
	var b []byte
	for _, f := range c.ready {
		b = append(b, f[:]...)
	}
	c.ready = c.ready[:0]
	_, err := c.Conn.Write(b)
	return err
}

// admit counts a grant of n bytes for stream if the budget has room and
// none of the connection's grants waits before it, or else holds its
// frame and starts the injector that writes it once there is room.
func (c *gatedConn) admit(stream uint32, n int64, frame []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return true // gRPC is closing the connection: nothing to bound
	}
	if len(c.held) == 0 && c.gate.budget.tryAcquire(n) {
		c.grantLocked(stream, n)
		return true
	}
	c.seq++
	h := heldGrant{seq: c.seq, stream: stream, n: n}
	copy(h.frame[:], frame)
	c.held = append(c.held, h)
	c.gate.heldGrants.Inc()
	if !c.injecting {
		c.injecting = true
		go c.inject()
	}
	return false
}

// grantLocked counts a grant of n bytes for stream, admitted in the
// budget. c.mu is held.
func (c *gatedConn) grantLocked(stream uint32, n int64) {
	if c.granted == nil {
		c.granted = map[uint32][]grant{}
	}
	c.granted[stream] = append(c.granted[stream], grant{n, time.Now()})
	c.gate.receivedBytes.Add(float64(n))
}

// inject writes the held grants, oldest first, as the budget makes room.
func (c *gatedConn) inject() {
	for {
		c.mu.Lock()
		if c.closed || len(c.held) == 0 {
			c.injecting = false
			c.mu.Unlock()
			return
		}
		h := c.held[0]
		c.mu.Unlock()
		for !c.gate.budget.tryAcquire(h.n) {
			ch := c.gate.budget.changed()
			if c.gate.budget.tryAcquire(h.n) {
				break
			}
			select {
			case <-ch:
			case <-c.done:
				return
			}
		}
		c.mu.Lock()
		if c.closed || len(c.held) == 0 || c.held[0].seq != h.seq { // its stream ended meanwhile
			c.mu.Unlock()
			c.gate.budget.release(h.n)
			continue
		}
		c.held = c.held[1:]
		c.gate.heldGrants.Dec()
		c.grantLocked(h.stream, h.n)
		c.mu.Unlock()
		c.wmu.Lock()
		c.ready = append(c.ready, h.frame)
		err := c.writeReady()
		c.wmu.Unlock()
		if err != nil {
			return // gRPC sees the connection fail on its own write
		}
	}
}

// received counts off a message gRPC has read: a grant of its length,
// the oldest of the connection's streams that has one.
func (c *gatedConn) received(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest uint32
	var at time.Time
	for stream, gs := range c.granted {
		if gs[0].n == n && (at.IsZero() || gs[0].at.Before(at)) {
			oldest, at = stream, gs[0].at
		}
	}
	if at.IsZero() {
		return // a message that needed no grant
	}
	gs := c.granted[oldest]
	if len(gs) == 1 {
		delete(c.granted, oldest)
	} else {
		c.granted[oldest] = gs[1:]
	}
	c.gate.receivedBytes.Sub(float64(n))
	c.gate.budget.release(n)
}

// streamEnded counts off a stream's grants and drops its held ones: gRPC
// frees what it received of them.
func (c *gatedConn) streamEnded(stream uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(stream)
	kept := c.held[:0]
	for _, h := range c.held {
		if h.stream != stream {
			kept = append(kept, h)
		} else {
			c.gate.heldGrants.Dec()
		}
	}
	c.held = kept
}

func (c *gatedConn) releaseLocked(stream uint32) {
	for _, g := range c.granted[stream] {
		c.gate.receivedBytes.Sub(float64(g.n))
		c.gate.budget.release(g.n)
	}
	delete(c.granted, stream)
}

// late reports a grant of the connection that has waited for its bytes
// longer than a client that means to send them takes.
func (c *gatedConn) late(now time.Time) (stream uint32, n int64, late bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, gs := range c.granted {
		if now.Sub(gs[0].at) > c.gate.slow(gs[0].n) {
			return s, gs[0].n, true
		}
	}
	return 0, 0, false
}

// Close closes the connection and counts off all it held.
func (c *gatedConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		for stream := range c.granted {
			c.releaseLocked(stream)
		}
		c.gate.heldGrants.Sub(float64(len(c.held)))
		c.held = nil
		close(c.done)
		c.mu.Unlock()
		c.gate.mu.Lock()
		delete(c.gate.conns, c.key)
		c.gate.mu.Unlock()
	})
	return c.Conn.Close()
}

// gateCreds gates every connection after its handshake (TLS or none), so
// that the gate reads HTTP/2 frames, not ciphertext.
type gateCreds struct {
	credentials.TransportCredentials
	gate *recvGate
}

func (c gateCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return c.gate.gateConn(conn), info, nil
}

func (c gateCreds) Clone() credentials.TransportCredentials {
	return gateCreds{c.TransportCredentials.Clone(), c.gate}
}

// gateStats tells the gate when gRPC has read a message: it tags each
// connection's context with its gatedConn, and counts off InPayloads.
type gateStats struct{ gate *recvGate }

type gatedConnKey struct{}

func (s gateStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if c := s.gate.lookup(info.LocalAddr, info.RemoteAddr); c != nil {
		return context.WithValue(ctx, gatedConnKey{}, c)
	}
	return ctx
}

func (gateStats) HandleConn(context.Context, stats.ConnStats) {}

func (gateStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (s gateStats) HandleRPC(ctx context.Context, st stats.RPCStats) {
	in, ok := st.(*stats.InPayload)
	if !ok || in.CompressedLength <= int(s.gate.threshold) {
		return
	}
	if c, ok := ctx.Value(gatedConnKey{}).(*gatedConn); ok {
		c.received(int64(in.CompressedLength))
	}
}
