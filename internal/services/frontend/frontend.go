// Package frontend is report E's front service (its "server1"): GET / calls
// the back service and returns its body. What guards the outward call is
// the Policy, each built from failsafe-go's policies:
//
//   - None: no timeout at all, the report's anti-pattern: a slow back holds
//     the front's request, connection and memory for as long as it likes
//     (or until the client leaves: the call follows the client's context).
//   - Timeout: an overall deadline per request (default 3 s, the report's),
//     plus a connect timeout, a response-header timeout and a body-read
//     timeout, each failing with its own reason.
//   - Breaker: Timeout inside a circuit breaker: when the failure rate over
//     a window passes a threshold, calls fail at once (503) until a trial
//     call after BreakerDelay succeeds.
//   - Hedge: Timeout around hedged requests ("The Tail at Scale"): when an
//     attempt has not answered after HedgeDelay, another is sent, up to
//     MaxHedges, the first answer wins and the rest are cancelled; a budget
//     caps the share of calls in flight that are hedges.
//   - Adaptive: Timeout inside Breaker inside an adaptive concurrency limit
//     (Netflix's concurrency-limits, as failsafe-go implements it): the
//     limit follows the median time of the calls, and calls beyond it are
//     shed at once with 503. It is for a back that slows down as a whole
//     when pushed (overload): it then takes less than the back's capacity
//     instead of queueing on it. A slow tail is not overload, and the
//     limiter ignores it (it reads the median, and starts at its highest
//     limit); a back that stops answering is the breaker's.
//
// Except with None, the deadline travels to the back in
// backend.TimeoutHeader, so the back stops work the front will not wait for.
// Every failure is answered with a 5xx status (502 bad answer, 503 refused
// by a policy, 504 too slow) and a one-line reason, the kind in the
// X-Failure header, and is counted by kind in
// frontend_requests_total{outcome}.
package frontend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/services/backend"
)

// Policy guards the call to the back.
type Policy string

// Policies.
const (
	None     Policy = "none"
	Timeout  Policy = "timeout"
	Breaker  Policy = "breaker"
	Hedge    Policy = "hedge"
	Adaptive Policy = "adaptive"
)

// Policies lists every policy, for flags and experiments.
var Policies = []Policy{None, Timeout, Breaker, Hedge, Adaptive}

// Defaults of Config's zero fields.
const (
	DefaultPolicy             = Timeout
	DefaultTimeout            = 3 * time.Second
	DefaultConnectTimeout     = time.Second
	DefaultHeaderTimeout      = 3 * time.Second
	DefaultBodyTimeout        = 3 * time.Second
	DefaultMaxBodyBytes       = 1 << 20
	DefaultMaxInflight        = 10000
	DefaultBreakerFailureRate = 0.5
	DefaultBreakerMinRequests = 20
	DefaultBreakerWindow      = 10 * time.Second
	DefaultBreakerDelay       = 5 * time.Second
	DefaultHedgeDelay         = 150 * time.Millisecond
	DefaultMaxHedges          = 2
	DefaultHedgeBudget        = 0.2
	DefaultLimitMin           = 10
	DefaultLimitMax           = 2000
	DefaultLimitInitial       = 2000
)

// Bounds on Config.
const (
	maxDuration     = time.Hour
	maxBodyBytes    = 64 << 20
	maxInflight     = 1_000_000
	maxHedges       = 5
	maxLimit        = 100_000
	maxIdlePerHost  = 4096
	maxHeaderBytes  = 64 << 10
	statusBodyBytes = 200 // of a failed answer, quoted in the reason
)

// Config configures the front. Backend is required; every zero field takes
// its Default* value. Timeouts are ignored with policy None.
type Config struct {
	// Backend is the back's URL, e.g. http://127.0.0.1:9000/ (required).
	Backend string
	// Policy guards the call (default Timeout).
	Policy Policy
	// Timeout is the overall deadline of a request's call to the back,
	// hedges included (default 3 s).
	Timeout time.Duration
	// ConnectTimeout bounds setting up a TCP connection (default 1 s).
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for the back's response headers, from
	// the start of the attempt, connecting included (default 3 s).
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading the back's body, from its headers
	// (default 3 s): a trickle cannot hold the front.
	BodyTimeout time.Duration
	// MaxBodyBytes bounds the back's answer (default 1 MiB).
	MaxBodyBytes int64
	// MaxInflight bounds the requests served at once; more are refused
	// with 503 (default 10000), so even policy None cannot grow forever.
	MaxInflight int
	// DisableKeepAlives opens a connection to the back for every call and
	// closes it after, as Node's default http agent did in report E's
	// time; by default connections are kept alive and reused.
	DisableKeepAlives bool

	// Breaker: the circuit opens when at least BreakerMinRequests calls
	// in the last BreakerWindow (default 20 in 10 s) failed at a rate of
	// BreakerFailureRate (default 0.5); it half-opens after BreakerDelay
	// (default 5 s) and closes after 3 trial calls succeed.
	BreakerFailureRate float64
	BreakerMinRequests uint
	BreakerWindow      time.Duration
	BreakerDelay       time.Duration

	// Hedge: another attempt after HedgeDelay without an answer (default
	// 150 ms, above the healthy back's p99 at its default 100 ms), up to
	// MaxHedges (default 2: with 1 in 10 calls slow, one hedge leaves 1 in
	// 100 requests slow, two leave 1 in 1000). HedgeBudget (default 0.2,
	// failsafe-go's) caps the share of calls in flight that are hedges;
	// hedges live long only when they too are slow, so the share of extra
	// requests stays well below it.
	HedgeDelay  time.Duration
	MaxHedges   int
	HedgeBudget float64

	// Adaptive: the concurrency limit moves between LimitMin and LimitMax
	// (default 10 and 2000), starting at LimitInitial (default 2000, the
	// highest: a limit climbs by about log10(limit) a second, so one that
	// starts low sheds a tail that needs rate x deadline permits for
	// minutes). The breaker's settings apply too.
	LimitMin, LimitMax, LimitInitial uint
}

// setDefaults fills the zero fields with their defaults and checks the
// rest.
func (c *Config) setDefaults() error {
	c.Policy = cmp.Or(c.Policy, DefaultPolicy)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, DefaultConnectTimeout)
	c.HeaderTimeout = cmp.Or(c.HeaderTimeout, DefaultHeaderTimeout)
	c.BodyTimeout = cmp.Or(c.BodyTimeout, DefaultBodyTimeout)
	c.BreakerWindow = cmp.Or(c.BreakerWindow, DefaultBreakerWindow)
	c.BreakerDelay = cmp.Or(c.BreakerDelay, DefaultBreakerDelay)
	c.HedgeDelay = cmp.Or(c.HedgeDelay, DefaultHedgeDelay)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxInflight = cmp.Or(c.MaxInflight, DefaultMaxInflight)
	c.BreakerFailureRate = cmp.Or(c.BreakerFailureRate, DefaultBreakerFailureRate)
	c.BreakerMinRequests = cmp.Or(c.BreakerMinRequests, DefaultBreakerMinRequests)
	c.MaxHedges = cmp.Or(c.MaxHedges, DefaultMaxHedges)
	c.HedgeBudget = cmp.Or(c.HedgeBudget, DefaultHedgeBudget)
	c.LimitMin = cmp.Or(c.LimitMin, DefaultLimitMin)
	c.LimitMax = cmp.Or(c.LimitMax, DefaultLimitMax)
	c.LimitInitial = cmp.Or(c.LimitInitial, min(max(DefaultLimitInitial, c.LimitMin), c.LimitMax))

	bad := func(format string, args ...any) error {
		return fmt.Errorf("frontend: "+format, args...)
	}
	u, err := url.Parse(c.Backend)
	switch {
	case c.Backend == "":
		return bad("no backend URL: give one, e.g. http://127.0.0.1:9000/")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil:
		return bad("backend URL %q: want http://host:port/path", c.Backend)
	}
	switch c.Policy {
	case None, Timeout, Breaker, Hedge, Adaptive:
	default:
		return bad("unknown policy %q: use none, timeout, breaker, hedge or adaptive", c.Policy)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", c.Timeout}, {"connect timeout", c.ConnectTimeout}, {"header timeout", c.HeaderTimeout},
		{"body timeout", c.BodyTimeout}, {"breaker window", c.BreakerWindow}, {"breaker delay", c.BreakerDelay}, {"hedge delay", c.HedgeDelay}} {
		if d.v < 0 || d.v > maxDuration {
			return bad("%s %v: want a positive duration up to %v", d.name, d.v, maxDuration)
		}
	}
	switch {
	case c.MaxBodyBytes < 0 || c.MaxBodyBytes > maxBodyBytes:
		return bad("max body bytes %d: want 1 to %d", c.MaxBodyBytes, maxBodyBytes)
	case c.MaxInflight < 0 || c.MaxInflight > maxInflight:
		return bad("max in flight %d: want 1 to %d", c.MaxInflight, maxInflight)
	case !(c.BreakerFailureRate > 0 && c.BreakerFailureRate <= 1):
		return bad("breaker failure rate %v: want more than 0, at most 1", c.BreakerFailureRate)
	case c.MaxHedges < 0 || c.MaxHedges > maxHedges:
		return bad("max hedges %d: want 1 to %d", c.MaxHedges, maxHedges)
	case !(c.HedgeBudget > 0 && c.HedgeBudget <= 1):
		return bad("hedge budget %v: want more than 0, at most 1", c.HedgeBudget)
	case c.Policy == Hedge && c.HedgeDelay >= c.Timeout:
		return bad("hedge delay %v must be shorter than the timeout %v, or no hedge is ever sent", c.HedgeDelay, c.Timeout)
	case c.LimitMax > maxLimit || c.LimitMin > c.LimitInitial || c.LimitInitial > c.LimitMax:
		return bad("concurrency limits min %d, initial %d, max %d: want min <= initial <= max <= %d", c.LimitMin, c.LimitInitial, c.LimitMax, maxLimit)
	}
	return nil
}

// answer is what a successful call returns.
type answer struct {
	body        []byte
	contentType string
}

// Front is the front service, an http.Handler serving GET /. Its methods
// are safe for concurrent use.
type Front struct {
	cfg     Config
	client  *http.Client
	exec    failsafe.Executor[*answer] // nil with policy None
	breaker circuitbreaker.CircuitBreaker[*answer]
	mux     *http.ServeMux

	inflight atomic.Int64
	requests *prometheus.CounterVec // by outcome: ok or a failure kind
	attempts *prometheus.CounterVec // calls to the back, by type: primary, hedge
	denied   prometheus.Counter     // hedges the budget refused
}

// New returns the front for cfg, registering its metrics with reg.
func New(cfg Config, reg prometheus.Registerer) (*Front, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	f := &Front{
		cfg: cfg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "frontend_requests_total",
			Help: "Requests on GET /, by outcome: ok, or the failure kind (deadline, connect_timeout, header_timeout, body_timeout, breaker_open, shed, inflight_limit, backend_status, body_too_large, unreachable, backend_error, client_gone).",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "frontend_backend_attempts_total", Help: "Calls sent to the back, by type: primary, or hedge.",
		}, []string{"type"}),
		denied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "frontend_hedges_denied_total", Help: "Hedges not sent because the hedge budget was spent.",
		}),
	}
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	if cfg.Policy != None {
		dialer.Timeout = cfg.ConnectTimeout
	}
	idle := min(cfg.MaxInflight, maxIdlePerHost)
	f.client = &http.Client{
		Transport: &http.Transport{
			DialContext:            dialer.DialContext,
			MaxIdleConns:           idle,
			MaxIdleConnsPerHost:    idle,
			IdleConnTimeout:        90 * time.Second,
			DisableCompression:     true,
			MaxResponseHeaderBytes: maxHeaderBytes,
			DisableKeepAlives:      cfg.DisableKeepAlives,
		},
		// A redirect is an answer like any other: not 200, so a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}

	deadline := timeout.New[*answer](cfg.Timeout)
	notCanceled := func(_ *answer, err error) bool { return err != nil && !errors.Is(err, context.Canceled) }
	if cfg.Policy == Breaker || cfg.Policy == Adaptive {
		f.breaker = circuitbreaker.NewBuilder[*answer]().
			HandleIf(notCanceled).
			WithFailureRateThreshold(cfg.BreakerFailureRate, cfg.BreakerMinRequests, cfg.BreakerWindow).
			WithDelay(cfg.BreakerDelay).
			WithSuccessThreshold(3).
			Build()
	}
	switch cfg.Policy {
	case Timeout:
		f.exec = failsafe.With[*answer](deadline)
	case Breaker:
		f.exec = failsafe.With[*answer](f.breaker, deadline)
	case Hedge:
		b := budget.NewBuilder().WithMaxRate(cfg.HedgeBudget).
			OnBudgetExceeded(func(budget.ExceededEvent) { f.denied.Inc() }).Build()
		hedge := hedgepolicy.NewBuilderWithDelay[*answer](cfg.HedgeDelay).
			WithMaxHedges(cfg.MaxHedges).
			WithBudget(b).
			// Only an answer ends the race; a failed attempt leaves the
			// others running (and a hedge still goes out after the delay).
			CancelIf(func(_ *answer, err error) bool { return err == nil }).
			Build()
		f.exec = failsafe.With[*answer](deadline, hedge)
	case Adaptive:
		// The limiter reads the median of its calls' times, not failsafe-go's
		// default p90: a slow tenth (cut at the deadline) is a slow tail, not
		// overload, and read at p90 it shed half of all requests. It starts
		// at LimitMax, since a tail needs rate x deadline permits at once and
		// the limit climbs by about log10(limit) a second; it comes down
		// when the median rises with concurrency, and it stays below 5x what
		// is in flight (failsafe-go's max limit factor). A back that stops
		// answering is the breaker's: the limiter notices it only after
		// several windows of the deadline's length.
		limiter := adaptivelimiter.NewBuilder[*answer]().
			WithLimits(cfg.LimitMin, cfg.LimitMax, cfg.LimitInitial).
			WithRecentQuantile(0.5).
			Build()
		f.exec = failsafe.With[*answer](limiter, f.breaker, deadline)
		if reg != nil {
			reg.MustRegister(
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "frontend_concurrency_limit", Help: "The adaptive concurrency limit to the back."},
					func() float64 { return float64(limiter.Limit()) }),
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "frontend_limiter_inflight", Help: "Calls holding a permit of the adaptive limit."},
					func() float64 { return float64(limiter.Inflight()) }))
		}
	}
	if reg != nil {
		reg.MustRegister(f.requests, f.attempts, f.denied,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "frontend_inflight_requests", Help: "Requests on GET / being served now."},
				func() float64 { return float64(f.inflight.Load()) }))
		if f.breaker != nil {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "frontend_breaker_open", Help: "The circuit breaker's state: 0 closed, 1 open, 0.5 half-open.",
			}, func() float64 {
				switch f.breaker.State() {
				case circuitbreaker.OpenState:
					return 1
				case circuitbreaker.HalfOpenState:
					return 0.5
				}
				return 0
			}))
		}
	}
	f.requests.WithLabelValues("ok")
	f.attempts.WithLabelValues("primary")
	f.attempts.WithLabelValues("hedge")
	f.mux = http.NewServeMux()
	f.mux.HandleFunc("GET /{$}", f.serve)
	return f, nil
}

// Config returns the front's configuration, defaults filled in.
func (f *Front) Config() Config { return f.cfg }

// ServeHTTP serves GET /.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Close closes the idle connections to the back.
func (f *Front) Close() { f.client.CloseIdleConnections() }

func (f *Front) serve(w http.ResponseWriter, r *http.Request) {
	if f.inflight.Add(1) > int64(f.cfg.MaxInflight) {
		f.inflight.Add(-1)
		f.fail(w, r, ErrTooManyInflight)
		return
	}
	defer f.inflight.Add(-1)
	var a *answer
	var err error
	if f.exec == nil {
		a, err = f.call(r.Context(), time.Time{}, false)
	} else {
		deadline := time.Now().Add(f.cfg.Timeout)
		a, err = f.exec.WithContext(r.Context()).GetWithExecution(func(exec failsafe.Execution[*answer]) (*answer, error) {
			return f.call(exec.Context(), deadline, exec.IsHedge())
		})
	}
	if err != nil {
		f.fail(w, r, err)
		return
	}
	if a.contentType != "" {
		w.Header().Set("Content-Type", a.contentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.Write(a.body)
	f.requests.WithLabelValues("ok").Inc()
}

// call makes one attempt at the back. ctx ends it from outside (the
// overall deadline, a hedge that won, the client leaving); the header and
// body timeouts end it from inside, with their own errors.
func (f *Front) call(ctx context.Context, deadline time.Time, hedge bool) (*answer, error) {
	if hedge {
		f.attempts.WithLabelValues("hedge").Inc()
	} else {
		f.attempts.WithLabelValues("primary").Inc()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.cfg.Backend, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBackend, err)
	}
	if !deadline.IsZero() {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, ErrDeadline
		}
		req.Header.Set(backend.TimeoutHeader, strconv.FormatInt(int64(math.Ceil(float64(left)/float64(time.Millisecond))), 10))
	}
	limited := f.cfg.Policy != None
	var headerTimer *time.Timer
	if limited {
		headerTimer = time.AfterFunc(f.cfg.HeaderTimeout, func() { cancel(ErrHeaderTimeout) })
	}
	resp, err := f.client.Do(req)
	if headerTimer != nil {
		headerTimer.Stop()
	}
	if err != nil {
		return nil, f.classify(ctx, err)
	}
	defer resp.Body.Close()
	if limited {
		bodyTimer := time.AfterFunc(f.cfg.BodyTimeout, func() { cancel(ErrBodyTimeout) })
		defer bodyTimer.Stop()
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, f.classify(ctx, err)
	}
	if int64(len(body)) > f.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, f.cfg.MaxBodyBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Code: resp.StatusCode, Body: snippet(body)}
	}
	return &answer{body: body, contentType: resp.Header.Get("Content-Type")}, nil
}

// classify turns a transport error into one of the package's errors.
func (f *Front) classify(ctx context.Context, err error) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrHeaderTimeout):
		return fmt.Errorf("%w (%v)", ErrHeaderTimeout, f.cfg.HeaderTimeout)
	case errors.Is(cause, ErrBodyTimeout):
		return fmt.Errorf("%w (%v)", ErrBodyTimeout, f.cfg.BodyTimeout)
	case ctx.Err() != nil:
		// Ended from outside: the caller knows why.
		return context.Canceled
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		if op.Timeout() {
			return fmt.Errorf("%w (%v)", ErrConnectTimeout, f.cfg.ConnectTimeout)
		}
		return fmt.Errorf("%w: %v", ErrUnreachable, op.Err)
	}
	return fmt.Errorf("%w: %v", ErrBackend, err)
}

func snippet(b []byte) string {
	s := string(b[:min(len(b), statusBodyBytes)])
	for i, c := range s {
		if c == '\n' || c == '\r' {
			return s[:i]
		}
	}
	return s
}

// Kind names the failure kind of an error the call returned, as counted in
// frontend_requests_total{outcome}, with the status the front answers.
func Kind(err error) (kind string, status int) {
	var se *StatusError
	switch {
	case errors.Is(err, ErrClientGone), errors.Is(err, context.Canceled):
		return "client_gone", 499
	case errors.Is(err, timeout.ErrExceeded), errors.Is(err, ErrDeadline):
		return "deadline", http.StatusGatewayTimeout
	case errors.As(err, &se) && se.Code == http.StatusGatewayTimeout:
		// The back gave up at the deadline the front sent it, a moment
		// before the front's own timer.
		return "deadline", http.StatusGatewayTimeout
	case errors.Is(err, ErrConnectTimeout):
		return "connect_timeout", http.StatusGatewayTimeout
	case errors.Is(err, ErrHeaderTimeout):
		return "header_timeout", http.StatusGatewayTimeout
	case errors.Is(err, ErrBodyTimeout):
		return "body_timeout", http.StatusGatewayTimeout
	case errors.Is(err, circuitbreaker.ErrOpen), errors.Is(err, ErrBreakerOpen):
		return "breaker_open", http.StatusServiceUnavailable
	case errors.Is(err, adaptivelimiter.ErrExceeded), errors.Is(err, ErrShed):
		return "shed", http.StatusServiceUnavailable
	case errors.Is(err, ErrTooManyInflight):
		return "inflight_limit", http.StatusServiceUnavailable
	case errors.As(err, &se):
		return "backend_status", http.StatusBadGateway
	case errors.Is(err, ErrBodyTooLarge):
		return "body_too_large", http.StatusBadGateway
	case errors.Is(err, ErrUnreachable):
		return "unreachable", http.StatusBadGateway
	}
	return "backend_error", http.StatusBadGateway
}

// fail answers a failed request: status by kind, the reason in the body,
// the kind in X-Failure; nothing when the client is gone.
func (f *Front) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		err = ErrClientGone
	}
	kind, status := Kind(err)
	f.requests.WithLabelValues(kind).Inc()
	if kind == "client_gone" {
		return
	}
	msg := err.Error()
	switch kind {
	case "deadline":
		msg = fmt.Sprintf("%v (%v)", ErrDeadline, f.cfg.Timeout)
	case "breaker_open":
		retry := 1
		if f.breaker != nil {
			retry = max(1, int(math.Ceil(f.breaker.RemainingDelay().Seconds())))
		}
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		msg = fmt.Sprintf("%v; retry in %d s", ErrBreakerOpen, retry)
	case "shed":
		msg = ErrShed.Error()
	}
	w.Header().Set("X-Failure", kind)
	http.Error(w, msg, status)
}
