package lb

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/server"
)

// TCP balances connections, not requests: each client connection is
// joined to one upstream, picked round robin among those not marked down,
// for its whole life, as a Kubernetes Service (kube-proxy) does. A
// connection an upstream refuses or does not accept within DialTimeout
// counts as its failure (MaxFails, FailTimeout) and is tried on the next
// upstream: nothing was sent yet. An HTTP/2 client such as gRPC sends all
// its requests on one connection, so behind TCP it stays on the upstream
// it first reached until the connection ends; a server that wants its
// clients spread anew ends their connections in time (gRPC's
// MaxConnectionAge). ResponseHeaderTimeout and IdleConnsPerUpstream do
// not apply.
type TCP struct {
	b *balancer

	mu     sync.Mutex
	conns  map[net.Conn]string // client side -> its upstream's address
	closed bool
	wg     sync.WaitGroup
}

// NewTCP returns a connection balancer over cfg.Upstreams. It registers
// its metrics with reg.
func NewTCP(cfg Config, reg prometheus.Registerer) (*TCP, error) {
	b, err := newBalancer(cfg, reg, "Connections")
	if err != nil {
		return nil, err
	}
	return &TCP{b: b, conns: map[net.Conn]string{}}, nil
}

// Serve accepts connections on ln until it fails or Close is called, and
// joins each to an upstream.
func (t *TCP) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			t.mu.Lock()
			closed := t.closed
			t.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("lb: accept: %w", err)
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.join(c)
		}()
	}
}

// join connects c to an upstream and copies both ways until either side
// ends; then both are closed.
func (t *TCP) join(c net.Conn) {
	up, addr, err := t.dial()
	if err != nil {
		c.Close()
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	t.conns[c] = addr
	t.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// dial connects to the next upstream that takes the connection.
func (t *TCP) dial() (net.Conn, string, error) {
	tried := make([]bool, len(t.b.ups))
	var errs []error
	for attempt := 0; ; attempt++ {
		u := t.b.pick(tried, attempt == 0)
		if u == nil {
			return nil, "", fmt.Errorf("lb: every upstream failed or is down: %w", errors.Join(errs...))
		}
		if attempt > 0 {
			t.b.retries.Inc()
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.b.cfg.DialTimeout)
		up, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.addr)
		cancel()
		if err == nil {
			u.succeeded()
			return up, u.addr, nil
		}
		u.failed(time.Now(), t.b.cfg)
		t.b.failures.WithLabelValues(u.addr).Inc()
		errs = append(errs, err)
	}
}

// Placement returns how many client connections each upstream has now,
// by address (upstreams without any are absent).
func (t *TCP) Placement() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := map[string]int{}
	for _, addr := range t.conns {
		n[addr]++
	}
	return n
}

// Close closes every connection joined so far and waits for them. Close
// Serve's listener first.
func (t *TCP) Close() error {
	t.mu.Lock()
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// DefaultTCPListen is TCPOptions.Listen's default.
const DefaultTCPListen = "127.0.0.1:7060"

// TCPOptions is what "hlab serve lb-tcp" takes: the balancer's Config
// (its HTTP-only fields aside) and the address clients connect to.
type TCPOptions struct {
	Config
	// Listen is where clients connect (default DefaultTCPListen).
	Listen string
}

// RegisterFlags adds the connection balancer's flags to fs.
func (o *TCPOptions) RegisterFlags(fs *flag.FlagSet) {
	o.registerUpstreamFlags(fs)
	fs.StringVar(&o.Listen, "listen", DefaultTCPListen, "address clients connect to; each connection goes to one upstream for its life")
}

// Args returns the command line that makes "hlab serve lb-tcp" run o.
func (o TCPOptions) Args() []string { return cliflag.Args(o) }

// ServeTCP balances connections on o.Listen until ctx ends, with its
// metrics and /healthz on hs's HTTP server.
func ServeTCP(ctx context.Context, hs server.Config, o TCPOptions) error {
	reg := prometheus.NewRegistry()
	t, err := NewTCP(o.Config, reg)
	if err != nil {
		return err
	}
	addr := cmp.Or(o.Listen, DefaultTCPListen)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("lb: cannot listen on %s (is the port taken? pass another --listen): %w", addr, err)
	}
	served := make(chan error, 1)
	go func() { served <- t.Serve(ln) }()
	hs.Registry = reg
	if hs.Logger != nil {
		hs.Logger.Info("balancing connections", "listen", ln.Addr().String(), "upstreams", o.Upstreams)
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- server.Run(ctx, hs, http.NotFoundHandler()) }()
	select {
	case err = <-httpErr:
	case err = <-served:
	}
	ln.Close()
	t.Close()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
