// Package lb is the built-in round-robin HTTP reverse proxy: the embedded
// default load balancer of the lab, used when nginx is not installed or
// when asked for (--lb builtin). It keeps connections to upstreams alive and
// bounds every outward call with timeouts, as nginx's proxy does.
package lb

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/highload-lab/hlab/internal/cliflag"
)

// ErrNoUpstreams is returned by New when no upstream is given.
var ErrNoUpstreams = errors.New("lb: no upstreams: give at least one host:port")

// Config configures the proxy. Only Upstreams is required.
type Config struct {
	// Upstreams are the host:port addresses to spread requests over, in order.
	Upstreams []string
	// DialTimeout bounds connecting to an upstream (default 2s).
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for an upstream's response
	// headers (default 60s, nginx's proxy_read_timeout).
	ResponseHeaderTimeout time.Duration
	// IdleConnsPerUpstream is how many keep-alive connections are kept per
	// upstream (default 64, like an nginx upstream "keepalive 64").
	IdleConnsPerUpstream int
}

// New returns a round-robin reverse proxy over cfg.Upstreams.
func New(cfg Config) (http.Handler, error) {
	if len(cfg.Upstreams) == 0 {
		return nil, ErrNoUpstreams
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.ResponseHeaderTimeout == 0 {
		cfg.ResponseHeaderTimeout = 60 * time.Second
	}
	if cfg.IdleConnsPerUpstream == 0 {
		cfg.IdleConnsPerUpstream = 64
	}
	targets := make([]*url.URL, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return nil, fmt.Errorf("lb: upstream %q is not host:port: %w", u, err)
		}
		targets[i] = &url.URL{Scheme: "http", Host: u}
	}
	var next atomic.Uint64
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			t := targets[(next.Add(1)-1)%uint64(len(targets))]
			r.SetURL(t)
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: cfg.DialTimeout}).DialContext,
			MaxIdleConns:          cfg.IdleConnsPerUpstream * len(targets),
			MaxIdleConnsPerHost:   cfg.IdleConnsPerUpstream,
			ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
			IdleConnTimeout:       60 * time.Second,
			DisableCompression:    true,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// 502 like nginx, with the reason, so a client can tell an
			// upstream failure from its own error.
			http.Error(w, "lb: upstream failed: "+err.Error(), http.StatusBadGateway)
		},
	}, nil
}

// RegisterFlags adds the balancer's flags to fs ("hlab serve lb").
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(cliflag.List(&c.Upstreams), "upstreams", "comma-separated host:port list to balance over (required)")
	fs.DurationVar(&c.DialTimeout, "dial-timeout", 2*time.Second, "bound on connecting to an upstream")
	fs.DurationVar(&c.ResponseHeaderTimeout, "response-header-timeout", 60*time.Second, "bound on the wait for an upstream's response headers (nginx's proxy_read_timeout)")
	fs.IntVar(&c.IdleConnsPerUpstream, "idle-conns-per-upstream", 64, "keep-alive connections kept per upstream (an nginx upstream's keepalive)")
}

// Args returns the command line that makes "hlab serve lb" run c.
func (c Config) Args() []string { return cliflag.Args(c) }
