package loadgen

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/url"
	"strings"
	"time"
)

// Defaults for options that are not given.
const (
	DefaultTimeout         = 10 * time.Second
	DefaultMethod          = "GET"
	defaultClosedConns     = 1
	defaultOpenConns       = 1000
	progressInterval       = 250 * time.Millisecond
	lateThreshold          = 10 * time.Millisecond
	maxRecordableLatencyUs = int64(time.Hour / time.Microsecond)
)

// An Option configures Run.
type Option func(*cfg)

type header struct{ key, value string }

// cfg is what the options build; validate checks it once, in Run.
type cfg struct {
	conns      int
	connsSet   bool
	rate       float64 // as given to Rate; 0 if Pace or closed model
	pacer      Pacer   // nil: closed model
	open       bool
	duration   time.Duration
	durSet     bool
	requests   int64
	reqSet     bool
	method     string
	body       []byte
	headers    []header
	timeout    time.Duration
	tlsConfig  *tls.Config
	onProgress func(Progress)
	scenario   Scenario // nil: every request is the same
	goroutines bool     // no event loops (Goroutines)

	// Derived by validate.
	addr  string // host:port for dialing
	isTLS bool
}

// Connections sets the number of connections. In the closed model (no Rate)
// each of the n connections sends its next request as soon as the previous
// one is answered, like wrk or siege; the default is 1. In the open model it
// caps the requests in flight, and so the connections opened, like wrk2's -c;
// the default is 1000.
func Connections(n int) Option {
	return func(c *cfg) { c.conns, c.connsSet = n, true }
}

// Rate selects the open model: requests are sent at a constant arrival rate
// of perSecond, whether or not earlier ones were answered (vegeta, wrk2,
// k6's constant-arrival-rate). It is Pace(ConstantPacer{Freq: perSecond}).
func Rate(perSecond float64) Option {
	return func(c *cfg) {
		c.open, c.rate, c.pacer = true, perSecond, ConstantPacer{Freq: perSecond}
	}
}

// Pace selects the open model with intended send times taken from p.
func Pace(p Pacer) Option {
	return func(c *cfg) {
		c.open, c.rate, c.pacer = true, 0, p
		if cp, ok := p.(ConstantPacer); ok {
			c.rate = cp.Freq
		}
	}
}

// Duration bounds the run by time: no request is sent after d has passed
// since the start. Requests in flight at that moment may finish (each within
// its Timeout) and are counted. With Requests as well, the run ends at
// whichever bound comes first.
func Duration(d time.Duration) Option {
	return func(c *cfg) { c.duration, c.durSet = d, true }
}

// Requests bounds the run by count: in the closed model n requests in total
// across all connections, in the open model the first n intended sends.
func Requests(n int64) Option {
	return func(c *cfg) { c.requests, c.reqSet = n, true }
}

// Method sets the HTTP method; the default is GET.
func Method(m string) Option {
	return func(c *cfg) { c.method = m }
}

// Body sets the request body, sent with every request. Run does not modify b
// but keeps using it, so the caller must not change it during the run.
func Body(b []byte) Option {
	return func(c *cfg) { c.body = b }
}

// Header adds a request header; repeat it for several headers. A "Host"
// header replaces the host taken from the URL.
func Header(key, value string) Option {
	return func(c *cfg) { c.headers = append(c.headers, header{key, value}) }
}

// Timeout bounds each request, from the moment it is sent (dialing included)
// to the last byte of its answer; the default is 10s. A request that runs out
// of time counts as an error of kind "timeout".
func Timeout(d time.Duration) Option {
	return func(c *cfg) { c.timeout = d }
}

// TLSConfig sets the TLS configuration for https:// targets (for example
// RootCAs for a test server). The default verifies the server as crypto/tls
// does.
func TLSConfig(t *tls.Config) Option {
	return func(c *cfg) { c.tlsConfig = t }
}

// OnProgress registers f to be called about every 250 ms while the run goes
// on, and once more with the final figures before Run returns. Calls never
// overlap; f should return quickly, as the next call waits for it.
func OnProgress(f func(Progress)) Option {
	return func(c *cfg) { c.onProgress = f }
}

// Goroutines runs every worker as a goroutine owning one connection, as on
// systems other than Linux and for https, instead of on event loops (see
// the package doc). An event loop keeps its P while it waits, so with
// GOMAXPROCS=1 a server in the same process answers up to 10 ms late: use
// it there, or to compare the two.
func Goroutines() Option {
	return func(c *cfg) { c.goroutines = true }
}

// Progress is a snapshot of a running load.
type Progress struct {
	Elapsed time.Duration
	// Total is the configured duration, 0 if the run is bound by count only.
	Total time.Duration
	// Requests is how many requests have finished, answered or failed.
	Requests int64
	// Errors is how many of them failed: a transport error, or a status
	// outside 200-399.
	Errors int64
	// Target is the configured request count, 0 if bound by duration only.
	Target int64
}

func newCfg(rawURL string, opts []Option) (*cfg, error) {
	c := &cfg{method: DefaultMethod, timeout: DefaultTimeout}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if err := c.validate(rawURL); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cfg) validate(rawURL string) error {
	if err := c.parseURL(rawURL); err != nil {
		return err
	}
	if !c.durSet && !c.reqSet {
		return ErrNoBound
	}
	if c.durSet && c.duration <= 0 {
		return fmt.Errorf("%w, got %v", ErrInvalidDuration, c.duration)
	}
	if c.reqSet && c.requests < 1 {
		return fmt.Errorf("%w, got %d", ErrInvalidRequests, c.requests)
	}
	if c.open {
		if c.pacer == nil {
			return fmt.Errorf("%w, got no pacer", ErrInvalidRate)
		}
		if cp, ok := c.pacer.(ConstantPacer); ok && !(cp.Freq > 0 && !math.IsInf(cp.Freq, 1)) {
			return fmt.Errorf("%w, got %v", ErrInvalidRate, cp.Freq)
		}
	}
	if c.connsSet && c.conns < 1 {
		return fmt.Errorf("%w, got %d", ErrInvalidConnections, c.conns)
	}
	if !c.connsSet {
		c.conns = defaultClosedConns
		if c.open {
			c.conns = defaultOpenConns
		}
	}
	if c.timeout <= 0 {
		return fmt.Errorf("%w, got %v", ErrInvalidTimeout, c.timeout)
	}
	if !isToken(c.method) {
		return fmt.Errorf("%w %q", ErrInvalidMethod, c.method)
	}
	for _, h := range c.headers {
		if !isToken(h.key) || strings.ContainsAny(h.value, "\r\n") {
			return fmt.Errorf("%w %q: %q", ErrInvalidHeader, h.key, h.value)
		}
	}
	return nil
}

func (c *cfg) parseURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%w %q: it does not parse", ErrInvalidURL, rawURL)
	}
	var port string
	switch u.Scheme {
	case "http":
		port = "80"
	case "https":
		port, c.isTLS = "443", true
	case "":
		return fmt.Errorf("%w %q: it needs a scheme, as in http://host:port/path", ErrInvalidURL, rawURL)
	default:
		return fmt.Errorf("%w %q: the scheme must be http or https", ErrInvalidURL, rawURL)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%w %q: it has no host", ErrInvalidURL, rawURL)
	}
	if p := u.Port(); p != "" {
		port = p
	}
	c.addr = net.JoinHostPort(u.Hostname(), port)
	return nil
}

// isToken reports whether s is a non-empty RFC 9110 token, the syntax of
// methods and header names.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0:
		default:
			return false
		}
	}
	return true
}
