package testkit

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to an upstream and makes the network
// faults a test needs, for real: Cut resets every connection through it
// (RST, as when a host dies or a middlebox drops its state), SetDown
// also refuses new ones until it is lifted (a partition), and
// SetUpstream points new connections elsewhere (a restarted server).
type Proxy struct {
	ln       net.Listener
	mu       sync.Mutex
	upstream string
	down     bool
	conns    map[net.Conn]struct{}
}

// NewProxy listens on a free loopback port and forwards to upstream
// until the test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p := &Proxy{ln: Listen(t), upstream: upstream, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(p.Cut)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			abort(c)
			continue
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			p.mu.Unlock()
			abort(c)
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(up, c); abort(up); abort(c) }()
		go func() { io.Copy(c, up); abort(c); abort(up) }()
	}
}

// abort closes c with a TCP RST instead of a FIN.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// Cut resets every connection through the proxy.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		abort(c)
		delete(p.conns, c)
	}
}

// SetDown cuts every connection and refuses (resets) new ones while
// down, or lets them through again.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
	if down {
		p.Cut()
	}
}

// SetUpstream points new connections at addr.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
}

// ProxyURL starts a Proxy to rawURL's host (a DSN or URI in URL form)
// and returns rawURL with its host replaced by the proxy's.
func ProxyURL(t testing.TB, rawURL string) (string, *Proxy) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}
