package testkit

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to an upstream and makes the network
// faults a test needs, for real: Cut resets every connection through it
// (RST, as when a host dies or a middlebox drops its state), SetDown
// also refuses new ones until it is lifted (a partition), SetBlackHole
// drops every byte both ways while connections stay open (a partition
// no one is told of: nothing fails, nothing arrives), and SetUpstream
// points new connections elsewhere (a restarted server).
type Proxy struct {
	ln        net.Listener
	mu        sync.Mutex
	upstream  string
	down      bool
	blackHole atomic.Bool
	conns     map[net.Conn]struct{}
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
		go func() { p.pipe(up, c); abort(up); abort(c) }()
		go func() { p.pipe(c, up); abort(c); abort(up) }()
	}
}

// pipe copies from src to dst until either fails, dropping what it
// reads while the proxy is a black hole.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.blackHole.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// SetBlackHole drops every byte through the proxy from now on, both
// ways, without closing anything (on), or forwards them again (off). The
// connections that lost bytes are reset when it is lifted, as a
// middlebox that lost their state would when they speak again.
func (p *Proxy) SetBlackHole(on bool) {
	p.blackHole.Store(on)
	if !on {
		p.Cut()
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
