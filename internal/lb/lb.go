// Package lb is the built-in round-robin HTTP reverse proxy (and, in
// tcp.go, a connection balancer like a Kubernetes Service): the embedded
// default load balancer of the lab, used when nginx is not installed or
// when asked for (--lb builtin). It stands in for nginx as report A1 ran
// it, with nginx's defaults: a new connection to the upstream for every
// request (no idle connections kept, unless IdleConnsPerUpstream says
// so), an upstream that fails marked down for a while (nginx's max_fails=1
// fail_timeout=10s), and a failed GET or HEAD sent again to the next
// upstream (proxy_next_upstream error timeout). Every outward call is
// bounded by timeouts, as nginx's proxy is.
package lb

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/cliflag"
)

// ErrNoUpstreams is returned by New when no upstream is given.
var ErrNoUpstreams = errors.New("lb: no upstreams: give at least one host:port")

// Config configures the proxy. Only Upstreams is required; the zero value
// of every other field is nginx's default behaviour.
type Config struct {
	// Upstreams are the host:port addresses to spread requests over, in order.
	Upstreams []string
	// DialTimeout bounds connecting to an upstream (default 2s).
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for an upstream's response
	// headers (default 60s, nginx's proxy_read_timeout).
	ResponseHeaderTimeout time.Duration
	// IdleConnsPerUpstream is how many keep-alive connections are kept per
	// upstream. 0 (the default, nginx's without an upstream "keepalive"):
	// none, a new connection per request, closed after its answer; 64 is
	// like an nginx upstream's "keepalive 64".
	IdleConnsPerUpstream int
	// MaxFails is how many failures within FailTimeout mark an upstream
	// down for FailTimeout (default 1, nginx's max_fails). A failure is a
	// connection refused or reset, or a timeout, before the answer's
	// headers; an answer of any status is a success.
	MaxFails int
	// FailTimeout is how long MaxFails failures are counted over and an
	// upstream they mark stays down (default 10s, nginx's fail_timeout).
	FailTimeout time.Duration
}

// withDefaults is c with every zero field set to its default: the one
// place the defaults live.
func (c Config) withDefaults() Config {
	c.DialTimeout = cmp.Or(c.DialTimeout, 2*time.Second)
	c.ResponseHeaderTimeout = cmp.Or(c.ResponseHeaderTimeout, 60*time.Second)
	c.MaxFails = cmp.Or(c.MaxFails, 1)
	c.FailTimeout = cmp.Or(c.FailTimeout, 10*time.Second)
	return c
}

// String describes how c balances, upstreams aside: what the lab declares
// as the built-in balancer's setup beside the report's nginx config.
func (c Config) String() string {
	c = c.withDefaults()
	conns := "a new upstream connection per request, closed after its answer (no idle connections kept)"
	if c.IdleConnsPerUpstream > 0 {
		conns = fmt.Sprintf("HTTP/1.1 to the upstreams, up to %d idle keep-alive connections kept per upstream", c.IdleConnsPerUpstream)
	}
	return fmt.Sprintf("round robin; %s; an upstream failing %d time(s) within %v marked down for %v; "+
		"a GET or HEAD that failed before its answer sent to the next upstream; connect timeout %v, response header timeout %v",
		conns, c.MaxFails, c.FailTimeout, c.FailTimeout, c.DialTimeout, c.ResponseHeaderTimeout)
}

// New returns a round-robin reverse proxy over cfg.Upstreams. It registers
// its metrics with reg.
func New(cfg Config, reg prometheus.Registerer) (http.Handler, error) {
	b, err := newBalancer(cfg, reg, "Requests")
	if err != nil {
		return nil, err
	}
	cfg = b.cfg
	b.transport = &http.Transport{
		DialContext:           (&net.Dialer{Timeout: cfg.DialTimeout}).DialContext,
		DisableKeepAlives:     cfg.IdleConnsPerUpstream == 0,
		MaxIdleConns:          cfg.IdleConnsPerUpstream * len(b.ups),
		MaxIdleConnsPerHost:   cfg.IdleConnsPerUpstream,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		IdleConnTimeout:       60 * time.Second,
		DisableCompression:    true,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// The balancer picks the upstream per attempt (RoundTrip).
			r.SetURL(&url.URL{Scheme: "http", Host: "upstream"})
			r.Out.Host = r.In.Host
		},
		Transport: b,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// 502 like nginx, with the reason, so a client can tell an
			// upstream failure from its own error.
			http.Error(w, "lb: upstream failed: "+err.Error(), http.StatusBadGateway)
		},
	}, nil
}

// newBalancer checks cfg's upstreams and returns a balancer over them
// without a transport; what names what it balances (requests,
// connections) in its metrics' help.
func newBalancer(cfg Config, reg prometheus.Registerer, what string) (*balancer, error) {
	if len(cfg.Upstreams) == 0 {
		return nil, ErrNoUpstreams
	}
	cfg = cfg.withDefaults()
	b := &balancer{cfg: cfg,
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lb_upstream_failures_total", Help: what + " an upstream failed before answering (refused, reset, timed out), by upstream.",
		}, []string{"upstream"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lb_retries_total", Help: what + " sent again to another upstream after one failed.",
		}),
	}
	reg.MustRegister(b.failures, b.retries)
	for _, u := range cfg.Upstreams {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return nil, fmt.Errorf("lb: upstream %q is not host:port: %w", u, err)
		}
		b.ups = append(b.ups, &upstream{addr: u})
	}
	return b, nil
}

// balancer is the proxy's transport: it picks an upstream per attempt,
// round robin over those not marked down, and tries the next one when a
// request that is safe to send again failed before its answer.
type balancer struct {
	cfg       Config
	ups       []*upstream
	next      atomic.Uint64
	transport *http.Transport
	failures  *prometheus.CounterVec
	retries   prometheus.Counter
}

// upstream is one upstream and its passive health: failures counted
// since the first of them, and until when it is down.
type upstream struct {
	addr      string
	mu        sync.Mutex
	fails     int
	firstFail time.Time
	downUntil time.Time
}

// until is when the upstream comes back; down before then.
func (u *upstream) until() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.downUntil
}

// failed counts a failure; MaxFails of them within FailTimeout mark the
// upstream down for FailTimeout.
func (u *upstream) failed(now time.Time, cfg Config) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fails == 0 || now.Sub(u.firstFail) > cfg.FailTimeout {
		u.fails, u.firstFail = 0, now
	}
	u.fails++
	if u.fails >= cfg.MaxFails {
		u.downUntil, u.fails = now.Add(cfg.FailTimeout), 0
	}
}

func (u *upstream) succeeded() {
	u.mu.Lock()
	u.fails = 0
	u.mu.Unlock()
}

// pick returns the next upstream in round-robin order that is neither
// down nor tried already, and marks it tried; nil when there is none.
// When every untried one is down, the first attempt gets the one that
// comes back first, so that a request is still tried rather than refused
// (nginx answers 502 "no live upstreams" there).
func (b *balancer) pick(tried []bool, first bool) *upstream {
	n := len(b.ups)
	start := int((b.next.Add(1) - 1) % uint64(n))
	now := time.Now()
	soonest := -1
	for i := range n {
		k := (start + i) % n
		if tried[k] {
			continue
		}
		if until := b.ups[k].until(); !now.Before(until) {
			tried[k] = true
			return b.ups[k]
		} else if soonest < 0 || until.Before(b.ups[soonest].until()) {
			soonest = k
		}
	}
	if !first || soonest < 0 {
		return nil
	}
	tried[soonest] = true
	return b.ups[soonest]
}

// RoundTrip sends req to an upstream, and again to the next one while it
// fails before its answer and may be sent again: a GET or HEAD without a
// body, which no upstream can have acted on twice to harm.
func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	again := (req.Method == http.MethodGet || req.Method == http.MethodHead) && (req.Body == nil || req.Body == http.NoBody)
	tried := make([]bool, len(b.ups))
	var errs []string
	for attempt := 0; ; attempt++ {
		u := b.pick(tried, attempt == 0)
		if u == nil {
			return nil, fmt.Errorf("lb: every upstream failed or is down: %s", strings.Join(errs, "; "))
		}
		if attempt > 0 {
			b.retries.Inc()
		}
		out := req.Clone(req.Context())
		out.URL.Host = u.addr
		resp, err := b.transport.RoundTrip(out)
		if err == nil {
			u.succeeded()
			return resp, nil
		}
		if req.Context().Err() != nil {
			return nil, err // the client went away: not the upstream's failure
		}
		u.failed(time.Now(), b.cfg)
		b.failures.WithLabelValues(u.addr).Inc()
		errs = append(errs, fmt.Sprintf("%s: %v", u.addr, err))
		if !again {
			return nil, err
		}
	}
}

// RegisterFlags adds the balancer's flags to fs ("hlab serve lb").
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.registerUpstreamFlags(fs)
	fs.DurationVar(&c.ResponseHeaderTimeout, "response-header-timeout", 60*time.Second, "bound on the wait for an upstream's response headers (nginx's proxy_read_timeout)")
	fs.IntVar(&c.IdleConnsPerUpstream, "idle-conns-per-upstream", 0, "keep-alive connections kept per upstream (an nginx upstream's keepalive); 0: a new connection per request, as nginx's default")
}

// registerUpstreamFlags adds the flags both modes share: the upstreams,
// how to reach them, and when one is taken as down.
func (c *Config) registerUpstreamFlags(fs *flag.FlagSet) {
	fs.Var(cliflag.List(&c.Upstreams), "upstreams", "comma-separated host:port list to balance over (required)")
	fs.DurationVar(&c.DialTimeout, "dial-timeout", 2*time.Second, "bound on connecting to an upstream")
	fs.IntVar(&c.MaxFails, "max-fails", 1, "failures within --fail-timeout that mark an upstream down (nginx's max_fails)")
	fs.DurationVar(&c.FailTimeout, "fail-timeout", 10*time.Second, "how long failures are counted over and a failed upstream stays down (nginx's fail_timeout)")
}

// Args returns the command line that makes "hlab serve lb" run c.
func (c Config) Args() []string { return cliflag.Args(c) }
