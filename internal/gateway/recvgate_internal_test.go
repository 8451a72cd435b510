package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/testkit"
)

// fakeConn records what is written to it.
type fakeConn struct {
	net.Conn
	out testkit.SyncBuffer
}

func (c *fakeConn) Write(p []byte) (int, error) { return c.out.Write(p) }

func (c *fakeConn) Close() error         { return nil }
func (c *fakeConn) LocalAddr() net.Addr  { return &net.TCPAddr{Port: 1} }
func (c *fakeConn) RemoteAddr() net.Addr { return &net.TCPAddr{Port: 2} }

func (c *fakeConn) written() []byte { return []byte(c.out.String()) }

func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	h := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[5:], stream)
	return append(h, payload...)
}

func windowUpdate(stream, inc uint32) []byte {
	return frame(frameWindowUpdate, 0, stream, binary.BigEndian.AppendUint32(nil, inc))
}

// TestGatedConnWrites: whatever way gRPC's writes cut the frames, the
// connection writes them all, in order, but for a grant the budget has
// no room for, which it writes once a release makes room; replenishment,
// the connection's window and other frames are never held; a stream's
// end releases its grants.
func TestGatedConnWrites(t *testing.T) {
	const window = 64 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		b := &budget{limit: 1 << 20}
		g := newRecvGate(b, window, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		fc := &fakeConn{}
		c := g.wrap(fc)
		blocker := int64(900 << 10) // in flight elsewhere: a 200 KiB grant does not fit
		b.add(blocker)
		data := frame(0x4, 0, 0, make([]byte, 6))                   // SETTINGS
		data = append(data, windowUpdate(0, 1<<20)...)              // the connection's window: never held
		data = append(data, windowUpdate(1, 16<<10)...)             // replenishment: never held
		data = append(data, frame(0x0, 0, 3, make([]byte, 100))...) // DATA
		held := windowUpdate(5, 200<<10)                            // a grant over the room left
		data = append(data, held...)
		data = append(data, frame(frameHeaders, 0, 3, make([]byte, 20))...)
		data = append(data, frame(frameHeaders, flagEndStream, 7, nil)...) // trailers of a stream with no grant
		want := bytes.Clone(data)
		// Write data cut at random places, as a buffered writer does.
		for rest := data; len(rest) > 0; {
			k := 1 + rng.IntN(len(rest))
			if _, err := c.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		withoutGrant := append(bytes.Clone(want[:bytes.Index(want, held)]), want[bytes.Index(want, held)+len(held):]...)
		if got := fc.written(); !bytes.Equal(got, withoutGrant) {
			t.Fatalf("round %d: wrote %d bytes, want %d: everything but the grant, in order", round, len(got), len(withoutGrant))
		}
		if got := b.used.Load(); got != blocker {
			t.Fatalf("round %d: %d bytes in the budget, want the %d in flight elsewhere only", round, got, blocker)
		}
		b.release(blocker) // room: the held grant goes out
		deadline := time.Now().Add(5 * time.Second)
		for !bytes.Equal(fc.written(), append(withoutGrant, held...)) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the held grant was not written after a release made room", round)
			}
			time.Sleep(time.Millisecond)
		}
		if got := b.used.Load(); got != 200<<10 {
			t.Fatalf("round %d: %d bytes in the budget, want the grant's %d", round, got, 200<<10)
		}
		// The stream ends (the client resets it): its grant is released.
		c.streamEnded(5)
		if got := b.used.Load(); got != 0 {
			t.Fatalf("round %d: %d bytes in the budget after the stream ended, want 0", round, got)
		}
	}
}

// TestGatedConnReads: the client's RST_STREAM, however the reads cut it,
// releases the stream's grant.
func TestGatedConnReads(t *testing.T) {
	b := &budget{limit: 1 << 30}
	g := newRecvGate(b, 64<<10, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for split := 1; split < 40; split++ {
		in := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), frame(0x4, 0, 0, nil)...)
		in = append(in, frame(0x0, 0, 9, make([]byte, 30))...)
		in = append(in, frame(frameRSTStream, 0, 9, make([]byte, 4))...)
		r := &splitReader{data: in, n: split}
		c := g.wrap(&readConn{fakeConn: &fakeConn{}, r: r})
		if _, err := c.Write(windowUpdate(9, 1<<20)); err != nil {
			t.Fatal(err)
		}
		if b.used.Load() != 1<<20 {
			t.Fatalf("split %d: the grant was not counted", split)
		}
		buf := make([]byte, 16)
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		if got := b.used.Load(); got != 0 {
			t.Fatalf("split %d: %d bytes still counted after the client reset the stream", split, got)
		}
	}
}

type splitReader struct {
	data []byte
	n    int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.data)
	r.data = r.data[k:]
	return k, nil
}

type readConn struct {
	*fakeConn
	r io.Reader
}

func (c *readConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestConnLimit: past max connections, one more is closed as soon as it
// is accepted; one closed makes room.
func TestConnLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	l := limitConns(ln, 2, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	// open reports whether the server keeps a new connection open.
	open := func() (net.Conn, bool) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = c.Read(make([]byte, 1))
		var ne net.Error
		return c, errors.As(err, &ne) && ne.Timeout()
	}
	a, okA := open()
	b, okB := open()
	defer a.Close()
	defer b.Close()
	if !okA || !okB {
		t.Fatal("the first two connections were closed")
	}
	if c, ok := open(); ok {
		c.Close()
		t.Fatal("a third connection past --max-connections 2 stayed open")
	}
	(<-accepted).Close()
	if c, ok := open(); !ok {
		t.Error("no room after one connection closed")
	} else {
		c.Close()
	}
	if n := testkit.MetricSum(t, reg, "databus_connections_refused_total", nil); n != 1 {
		t.Errorf("databus_connections_refused_total = %v, want 1", n)
	}
}

// BenchmarkGatedConn is what the gate adds to every byte gRPC reads and
// writes: reading the frame headers of 32 KiB writes of 16 KiB DATA
// frames (a subscriber's deliveries) and of the reads of the same.
func BenchmarkGatedConn(b *testing.B) {
	g := newRecvGate(&budget{limit: 1 << 30}, 64<<10, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	var chunk []byte
	for len(chunk) < 64<<10 {
		chunk = append(chunk, frame(0x0, 0, 1, make([]byte, 16<<10-frameHeaderLen))...)
	}
	b.Run("write", func(b *testing.B) {
		c := g.wrap(discardConn{})
		b.SetBytes(32 << 10)
		for i := 0; b.Loop(); i++ {
			off := (i * 32 << 10) % len(chunk)
			c.Write(chunk[off : off+32<<10])
		}
	})
	b.Run("read", func(b *testing.B) {
		r := &loopReader{data: chunk}
		c := g.wrap(&readConn{fakeConn: &fakeConn{}, r: r})
		c.inSkip = 0
		buf := make([]byte, 32<<10)
		b.SetBytes(32 << 10)
		for b.Loop() {
			c.Read(buf)
		}
	})
}

type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }
func (discardConn) LocalAddr() net.Addr         { return &net.TCPAddr{Port: 3} }
func (discardConn) RemoteAddr() net.Addr        { return &net.TCPAddr{Port: 4} }

// loopReader reads data over and over.
type loopReader struct {
	data []byte
	off  int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}
