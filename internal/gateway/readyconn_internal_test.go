//go:build linux

package gateway

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
)

// grpcReadyReader is grpc-go's optional connection interface
// (google.golang.org/grpc/internal/transport/readyreader.Reader): a
// connection that has it is read into pooled buffers, taken only while
// bytes are there, instead of a buffer of its own for its whole life.
type grpcReadyReader interface {
	ReadOnReady(bufSize int, pool mem.BufferPool) (b *[]byte, n int, err error)
}

// countingPool counts the buffers taken and not given back.
type countingPool struct {
	mu  sync.Mutex
	out int
}

func (p *countingPool) Get(n int) *[]byte {
	p.mu.Lock()
	p.out++
	p.mu.Unlock()
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(*[]byte) {
	p.mu.Lock()
	p.out--
	p.mu.Unlock()
}

// TestReadyConn: the gate's connection over a plaintext socket, as the
// gateway's listener accepts it, is read as grpc-go reads a bare socket:
// into a pool's buffer, taken when bytes are there; the client's
// RST_STREAM still releases the stream's grant, and the peer's close is
// io.EOF with every buffer back. Before, the gate hid the socket and
// grpc-go gave each connection a 32 KiB buffer of its own.
func TestReadyConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &budget{limit: 1 << 30}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := limitConns(ln, 10, reg, log)
	defer l.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	creds := gateCreds{insecure.NewCredentials(), newRecvGate(b, 64<<10, reg, log)}
	conn, _, err := creds.ServerHandshake(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rr, ok := conn.(grpcReadyReader)
	if !ok {
		t.Fatalf("the gate's connection is a %T, without ReadOnReady: grpc-go gives it a read buffer of its own", conn)
	}
	c := conn.(*readyConn)
	if _, err := c.Write(windowUpdate(9, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if b.used.Load() != 1<<20 {
		t.Fatal("the grant was not counted")
	}

	in := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), frame(0x4, 0, 0, nil)...)
	in = append(in, frame(0x0, 0, 9, make([]byte, 30))...)
	in = append(in, frame(frameRSTStream, 0, 9, make([]byte, 4))...)
	go func() {
		for _, part := range [][]byte{in[:5], in[5:40], in[40:]} {
			client.Write(part)
		}
		// Half-closed: a close with the grant unread would reset the connection.
		client.(*net.TCPConn).CloseWrite()
	}()
	pool := &countingPool{}
	var got []byte
	for {
		buf, n, err := rr.ReadOnReady(16, pool)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, (*buf)[:n]...)
		pool.Put(buf)
	}
	if string(got) != string(in) {
		t.Errorf("read %d bytes, want the %d the client sent", len(got), len(in))
	}
	if pool.out != 0 {
		t.Errorf("%d buffers not given back to the pool", pool.out)
	}
	if used := b.used.Load(); used != 0 {
		t.Errorf("%d bytes still counted after the client reset the stream", used)
	}
}
