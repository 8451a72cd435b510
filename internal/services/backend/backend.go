// Package backend is report E's dependency (its "server2"): GET / answers
// after a delay, 100 ms by default, and fault injection makes it misbehave
// the ways a real dependency does:
//
//   - slow requests: a fraction of requests (SlowFraction; the CLI's
//     default is 1 in 10, the report's fault) take SlowDelay (10 s) instead;
//   - trickle mode: the headers go out at once, then the body one byte per
//     TrickleInterval, so only a body-read timeout catches it;
//   - black-hole mode: the connection is accepted and the request read, and
//     nothing is ever answered until the caller gives up.
//
// The caller's deadline travels in the TimeoutHeader header (milliseconds
// left, relative, so clocks need not agree). The back honours it: work that
// is not done by then stops, answering 504, instead of holding a goroutine
// for a caller that is gone. A black hole ignores it, being a black hole.
//
// The fault can be changed while the service runs, for experiments in
// which a healthy back turns bad: PUT /fault?mode=blackhole (or delay,
// slow_fraction, slow_delay, trickle_interval, body_bytes; the fields not
// given keep their values); GET /fault shows the current settings as JSON.
// It is a lab tool: do not expose it beyond a test network.
package backend

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config's zero fields.
const (
	DefaultDelay           = 100 * time.Millisecond
	DefaultSlowDelay       = 10 * time.Second
	DefaultTrickleInterval = 100 * time.Millisecond
	DefaultBodyBytes       = 64
)

// Bounds on Config.
const (
	MaxDelay           = time.Hour
	MaxTrickleInterval = time.Minute
	MaxBodyBytes       = 1 << 20
)

// TimeoutHeader carries how long the caller will wait for the answer, in
// whole milliseconds from when it sent the request (1 to MaxTimeoutMs).
const TimeoutHeader = "X-Timeout-Ms"

// MaxTimeoutMs bounds TimeoutHeader: one hour.
const MaxTimeoutMs = 3_600_000

// Mode is how the back answers.
type Mode string

// Modes.
const (
	Normal    Mode = "normal"    // after Delay, or SlowDelay for SlowFraction of requests
	Trickle   Mode = "trickle"   // headers at once, then one body byte per TrickleInterval
	BlackHole Mode = "blackhole" // never answers
)

// Config is the back's behaviour. The zero value is a healthy back that
// answers 64 bytes after 100 ms; zero fields take the Default* values.
type Config struct {
	// Mode is Normal (the default), Trickle or BlackHole.
	Mode Mode `json:"mode"`
	// Delay is how long a normal answer takes (default 100 ms, at most 1 h).
	Delay time.Duration `json:"delay"`
	// SlowFraction is the share of normal-mode requests, 0 to 1, that take
	// SlowDelay instead (0: none). Which requests is random.
	SlowFraction float64 `json:"slow_fraction"`
	// SlowDelay is how long a slow answer takes (default 10 s, at most 1 h).
	SlowDelay time.Duration `json:"slow_delay"`
	// TrickleInterval is the pause before each body byte in trickle mode
	// (default 100 ms, 1 ms to 1 min).
	TrickleInterval time.Duration `json:"trickle_interval"`
	// BodyBytes is the size of the answer (default 64, at most 1 MiB).
	BodyBytes int `json:"body_bytes"`
}

// setDefaults fills in defaults and checks bounds. It is idempotent.
func (c *Config) setDefaults() error {
	c.Mode = cmp.Or(c.Mode, Normal)
	c.Delay = cmp.Or(c.Delay, DefaultDelay)
	c.SlowDelay = cmp.Or(c.SlowDelay, DefaultSlowDelay)
	c.TrickleInterval = cmp.Or(c.TrickleInterval, DefaultTrickleInterval)
	c.BodyBytes = cmp.Or(c.BodyBytes, DefaultBodyBytes)
	switch c.Mode {
	case Normal, Trickle, BlackHole:
	default:
		return fmt.Errorf("%w, got %q", ErrBadMode, c.Mode)
	}
	switch {
	case c.Delay < 0 || c.Delay > MaxDelay:
		return fmt.Errorf("%w: delay %v: want 0 (default %v) to %v", ErrBadConfig, c.Delay, DefaultDelay, MaxDelay)
	case c.SlowDelay < 0 || c.SlowDelay > MaxDelay:
		return fmt.Errorf("%w: slow delay %v: want 0 (default %v) to %v", ErrBadConfig, c.SlowDelay, DefaultSlowDelay, MaxDelay)
	case !(c.SlowFraction >= 0 && c.SlowFraction <= 1):
		return fmt.Errorf("%w: slow fraction %v: want 0 to 1", ErrBadConfig, c.SlowFraction)
	case c.TrickleInterval < time.Millisecond || c.TrickleInterval > MaxTrickleInterval:
		return fmt.Errorf("%w: trickle interval %v: want 1ms to %v", ErrBadConfig, c.TrickleInterval, MaxTrickleInterval)
	case c.BodyBytes < 0 || c.BodyBytes > MaxBodyBytes:
		return fmt.Errorf("%w: body bytes %d: want 0 (default %d) to %d", ErrBadConfig, c.BodyBytes, DefaultBodyBytes, MaxBodyBytes)
	}
	return nil
}

// state is what a request reads, swapped whole on a fault change.
type state struct {
	cfg  Config
	body []byte
}

// Service is the back. It is an http.Handler; its methods are safe for
// concurrent use.
type Service struct {
	st  atomic.Pointer[state]
	mux *http.ServeMux

	requests *prometheus.CounterVec // by kind: normal, slow, trickle, blackhole
	answers  *prometheus.CounterVec // by outcome
	inflight prometheus.Gauge
}

// Outcomes counted in backend_answers_total.
const (
	outcomeOK       = "ok"
	outcomeDeadline = "deadline"    // gave up at the caller's deadline
	outcomeCanceled = "canceled"    // the caller went away first
	outcomeBad      = "bad_request" // an invalid TimeoutHeader
)

// New returns the back with cfg, registering its metrics with reg.
func New(cfg Config, reg prometheus.Registerer) (*Service, error) {
	s := &Service{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "backend_requests_total",
			Help: "Requests received on GET /, by how they were served: normal, slow, trickle, blackhole.",
		}, []string{"kind"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "backend_answers_total",
			Help: "Requests finished on GET /, by outcome: ok, deadline (gave up at the caller's deadline), canceled (caller gone), bad_request.",
		}, []string{"outcome"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "backend_inflight_requests", Help: "Requests on GET / being served now.",
		}),
	}
	if err := s.SetFault(cfg); err != nil {
		return nil, err
	}
	if reg != nil {
		reg.MustRegister(s.requests, s.answers, s.inflight)
	}
	for _, k := range []string{"normal", "slow", "trickle", "blackhole"} {
		s.requests.WithLabelValues(k)
	}
	for _, o := range []string{outcomeOK, outcomeDeadline, outcomeCanceled, outcomeBad} {
		s.answers.WithLabelValues(o)
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.serve)
	s.mux.HandleFunc("GET /fault", s.getFault)
	s.mux.HandleFunc("PUT /fault", s.putFault)
	return s, nil
}

// SetFault replaces the back's behaviour; requests already being served
// keep the behaviour they started with.
func (s *Service) SetFault(cfg Config) error {
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	s.st.Store(&state{cfg: cfg, body: makeBody(cfg.BodyBytes)})
	return nil
}

// Config returns the current behaviour, defaults filled in.
func (s *Service) Config() Config { return s.st.Load().cfg }

func makeBody(n int) []byte {
	const line = "hello from the backend\n"
	b := []byte(strings.Repeat(line, n/len(line)+1)[:n])
	if n > 0 {
		b[n-1] = '\n'
	}
	return b
}

// ServeHTTP serves GET / and the fault endpoints.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// errDeadline is the cause of a request context ended by TimeoutHeader.
var errDeadline = fmt.Errorf("backend: the caller's deadline (%s) passed", TimeoutHeader)

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	st := s.st.Load()
	ctx := r.Context()
	if v := r.Header.Get(TimeoutHeader); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 1 || ms > MaxTimeoutMs {
			s.answers.WithLabelValues(outcomeBad).Inc()
			http.Error(w, fmt.Sprintf("backend: bad %s %q: want whole milliseconds from 1 to %d", TimeoutHeader, v, MaxTimeoutMs), http.StatusBadRequest)
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, time.Duration(ms)*time.Millisecond, errDeadline)
		defer cancel()
	}
	s.inflight.Inc()
	defer s.inflight.Dec()

	switch st.cfg.Mode {
	case BlackHole:
		s.requests.WithLabelValues("blackhole").Inc()
		// Nothing, not even giving up at the deadline: only the caller
		// leaving (or the server closing) ends it, and then no answer goes
		// out (ErrAbortHandler closes the connection without one).
		<-r.Context().Done()
		s.answers.WithLabelValues(outcomeCanceled).Inc()
		panic(http.ErrAbortHandler)
	case Trickle:
		s.requests.WithLabelValues("trickle").Inc()
		s.trickle(ctx, w, st)
		return
	}
	delay, kind := st.cfg.Delay, "normal"
	if st.cfg.SlowFraction > 0 && rand.Float64() < st.cfg.SlowFraction {
		delay, kind = st.cfg.SlowDelay, "slow"
	}
	s.requests.WithLabelValues(kind).Inc()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		s.gaveUp(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(st.body)))
	w.Write(st.body)
	s.answers.WithLabelValues(outcomeOK).Inc()
}

// trickle sends the headers at once, then the body a byte at a time. When
// the deadline passes or the caller leaves it aborts the connection, so
// the caller sees a short body, not a complete one.
func (s *Service) trickle(ctx context.Context, w http.ResponseWriter, st *state) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(st.body)))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	t := time.NewTicker(st.cfg.TrickleInterval)
	defer t.Stop()
	for i := range st.body {
		select {
		case <-t.C:
		case <-ctx.Done():
			s.countGaveUp(ctx)
			panic(http.ErrAbortHandler)
		}
		if _, err := w.Write(st.body[i : i+1]); err != nil {
			s.answers.WithLabelValues(outcomeCanceled).Inc()
			return
		}
		if err := rc.Flush(); err != nil {
			s.answers.WithLabelValues(outcomeCanceled).Inc()
			return
		}
	}
	s.answers.WithLabelValues(outcomeOK).Inc()
}

// gaveUp answers a request whose context ended before its answer was due:
// 504 when the caller's deadline passed, nothing when the caller left.
func (s *Service) gaveUp(w http.ResponseWriter, r *http.Request) {
	if r.Context().Err() != nil {
		s.answers.WithLabelValues(outcomeCanceled).Inc()
		return
	}
	s.answers.WithLabelValues(outcomeDeadline).Inc()
	http.Error(w, fmt.Sprintf("backend: gave up: the caller's deadline (%s: %s ms) passed before the answer was ready",
		TimeoutHeader, r.Header.Get(TimeoutHeader)), http.StatusGatewayTimeout)
}

func (s *Service) countGaveUp(ctx context.Context) {
	if context.Cause(ctx) == errDeadline {
		s.answers.WithLabelValues(outcomeDeadline).Inc()
		return
	}
	s.answers.WithLabelValues(outcomeCanceled).Inc()
}

// faultJSON is Config as GET /fault shows it, durations as strings.
type faultJSON struct {
	Mode            Mode    `json:"mode"`
	Delay           string  `json:"delay"`
	SlowFraction    float64 `json:"slow_fraction"`
	SlowDelay       string  `json:"slow_delay"`
	TrickleInterval string  `json:"trickle_interval"`
	BodyBytes       int     `json:"body_bytes"`
}

func (s *Service) writeFault(w http.ResponseWriter) {
	c := s.Config()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(faultJSON{c.Mode, c.Delay.String(), c.SlowFraction, c.SlowDelay.String(), c.TrickleInterval.String(), c.BodyBytes})
}

func (s *Service) getFault(w http.ResponseWriter, r *http.Request) { s.writeFault(w) }

// putFault changes the fault from query or form fields; fields not given
// keep their current values.
func (s *Service) putFault(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "backend: cannot parse the fault fields: "+err.Error(), http.StatusBadRequest)
		return
	}
	cfg := s.Config()
	var errs []string
	dur := func(key string, dst *time.Duration) {
		if v := r.Form.Get(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s %q: want a duration such as 100ms or 10s", key, v))
				return
			}
			*dst = d
		}
	}
	for key := range r.Form {
		switch key {
		case "mode", "delay", "slow_fraction", "slow_delay", "trickle_interval", "body_bytes":
		default:
			errs = append(errs, fmt.Sprintf("unknown field %q (known: mode, delay, slow_fraction, slow_delay, trickle_interval, body_bytes)", key))
		}
	}
	if v := r.Form.Get("mode"); v != "" {
		cfg.Mode = Mode(v)
	}
	dur("delay", &cfg.Delay)
	dur("slow_delay", &cfg.SlowDelay)
	dur("trickle_interval", &cfg.TrickleInterval)
	if v := r.Form.Get("slow_fraction"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Sprintf("slow_fraction %q: want a number from 0 to 1", v))
		}
		cfg.SlowFraction = f
	}
	if v := r.Form.Get("body_bytes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("body_bytes %q: want a whole number", v))
		}
		cfg.BodyBytes = n
	}
	if len(errs) > 0 {
		http.Error(w, "backend: "+strings.Join(errs, "; "), http.StatusBadRequest)
		return
	}
	if err := s.SetFault(cfg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.writeFault(w)
}
