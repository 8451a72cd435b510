// Package server runs an hlab service's HTTP handler with what every service
// shares: GET /healthz, GET /readyz (see Config.Ready and Config.Fresh) and
// GET /livez,
// Prometheus GET /metrics, per-route request metrics, bounded timeouts, and
// a graceful shutdown when the context ends (SIGTERM).
package server

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures a service's HTTP server. The zero value works: it
// listens on 127.0.0.1:8080 with the defaults documented on each field.
type Config struct {
	// Name labels the service in logs and metrics (default "service").
	Name string
	// Addr is the address to listen on (default "127.0.0.1:8080").
	// Ignored when Listener is set.
	Addr string
	// Listener, when set, is used instead of listening on Addr, so tests
	// and callers can bind :0 and learn the port first.
	Listener net.Listener
	// AdminAddr, when set, is a second address that serves Go's profiles
	// under /debug/pprof/ (default "": none). They are never served on
	// Addr: /debug/pprof/cmdline shows the command line (a secret given
	// as a flag rather than a file or the environment included), and a
	// CPU profile or trace is work on demand. Keep it on loopback
	// (127.0.0.1:PORT) or a network only operators reach.
	AdminAddr string
	// AdminListener, when set, is used instead of listening on AdminAddr.
	AdminListener net.Listener
	// MetricsOnAdmin serves /metrics on the admin address instead of
	// Addr: a public port then tells no one the service's load, routes,
	// pool and runtime. Without an admin address, /metrics is served
	// nowhere (Run warns).
	MetricsOnAdmin bool
	// ReadHeaderTimeout bounds how long a client may take to send request
	// headers (default 10s): a slow client must not hold a connection forever.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, from
	// its first byte (default DefaultReadTimeout; negative: none). A
	// client that trickles its body gets its read failed and its
	// connection closed at this bound, instead of holding the connection
	// and the handler's goroutine for as long as it likes. A handler that
	// takes long uploads by design moves its own request's deadline with
	// http.ResponseController.SetReadDeadline.
	ReadTimeout time.Duration
	// WriteTimeout bounds answering a request, from the end of its
	// headers to the last byte of the answer (default DefaultWriteTimeout;
	// negative: none). Past it the answer's writes fail and the connection
	// is closed; the handler itself is not stopped (bound its work with
	// its context). A service whose handlers run long by design (fault
	// injection, an unguarded call, a proxy) turns it off; a handler that
	// streams or upgrades (WebSocket, long poll) lifts it for its own
	// request with LiftTimeouts.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long (default 120s).
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown (default 10s); requests
	// still running after it are cut off.
	ShutdownTimeout time.Duration
	// Registry receives the service's own metrics; /metrics serves it with
	// the Go runtime, process and HTTP metrics added (default: a new one).
	Registry *prometheus.Registry
	// Logger receives start and stop events (default slog.Default()).
	Logger *slog.Logger
	// Ready reports whether the service can take traffic; /healthz answers
	// 503 "not ready" while it returns non-nil (default: always ready).
	// The error's text goes to the log, not to the caller: it may name a
	// database's user and host, or brokers.
	Ready func() error
	// Fresh reports whether the service's data is recent enough to
	// answer from (a replica within its staleness bound). /readyz answers
	// 503 while Ready or Fresh returns non-nil; /healthz reads Ready
	// only, so a Kubernetes liveness probe on it does not restart an
	// instance whose data is merely old, while a readiness probe on
	// /readyz stops routing to it (default: always fresh).
	Fresh func() error
}

// Defaults of Config's timeouts.
const (
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = 30 * time.Second
)

func (c *Config) setDefaults() {
	c.Name = cmp.Or(c.Name, "service")
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:8080")
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, 10*time.Second)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 120*time.Second)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 10*time.Second)
	c.Registry = cmp.Or(c.Registry, prometheus.NewRegistry())
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Run serves h (with /healthz and /metrics added) until ctx is done, then
// shuts down gracefully. With an admin address it serves Go's profiles
// there too. It returns nil after a clean shutdown.
func Run(ctx context.Context, cfg Config, h http.Handler) error {
	cfg.setDefaults()
	ln := cfg.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", cfg.Addr)
		if err != nil {
			return fmt.Errorf("server: %s cannot listen on %s (is the port taken? pass another --addr): %w", cfg.Name, cfg.Addr, err)
		}
	}
	adminLn := cfg.AdminListener
	if cfg.MetricsOnAdmin && adminLn == nil && cfg.AdminAddr == "" {
		cfg.Logger.Warn("no /metrics: they are served on the admin address only, and there is none (give --admin-addr 127.0.0.1:PORT)", "service", cfg.Name)
	}
	if adminLn == nil && cfg.AdminAddr != "" {
		var err error
		adminLn, err = net.Listen("tcp", cfg.AdminAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("server: %s cannot listen on the admin address %s (is the port taken? pass another --admin-addr, or none): %w", cfg.Name, cfg.AdminAddr, err)
		}
	}
	srv := &http.Server{
		Handler:           Handler(cfg, h),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       max(cfg.ReadTimeout, 0),
		WriteTimeout:      max(cfg.WriteTimeout, 0),
		IdleTimeout:       cfg.IdleTimeout,
	}
	cfg.Logger.Info("listening", "service", cfg.Name, "addr", ln.Addr().String(),
		"read_timeout", max(cfg.ReadTimeout, 0), "write_timeout", max(cfg.WriteTimeout, 0))
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	servers := []*http.Server{srv}
	if adminLn != nil {
		// No write timeout: a CPU profile or trace takes as long as asked
		// (30 s by default), and pprof refuses one longer than it.
		admin := &http.Server{
			Handler:           adminHandler(cfg),
			ReadHeaderTimeout: cfg.ReadHeaderTimeout,
			ReadTimeout:       max(cfg.ReadTimeout, 0),
			IdleTimeout:       cfg.IdleTimeout,
		}
		addr := adminLn.Addr().String()
		if !isLoopback(addr) {
			cfg.Logger.Warn("the admin address is not loopback: whoever reaches it reads the command line and takes profiles", "service", cfg.Name, "admin_addr", addr)
		}
		serves := "/debug/pprof/"
		if cfg.MetricsOnAdmin {
			serves += " /metrics"
		}
		cfg.Logger.Info("admin listening", "service", cfg.Name, "admin_addr", addr, "serves", serves)
		go func() { errc <- admin.Serve(adminLn) }()
		servers = append(servers, admin)
	}
	select {
	case err := <-errc:
		for _, s := range servers {
			s.Close()
		}
		return fmt.Errorf("server: %s stopped: %w", cfg.Name, err)
	case <-ctx.Done():
	}
	cfg.Logger.Info("shutting down", "service", cfg.Name)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	var shutdownErr error
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			s.Close()
			shutdownErr = err
		}
	}
	if shutdownErr != nil {
		return fmt.Errorf("server: %s did not shut down within %s: %w", cfg.Name, cfg.ShutdownTimeout, shutdownErr)
	}
	for range servers {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

// adminHandler is what Run serves on the admin address: Go's profiles,
// and /metrics with MetricsOnAdmin.
func adminHandler(cfg Config) http.Handler {
	h := AdminHandler()
	if !cfg.MetricsOnAdmin {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	mux.Handle("/", h)
	return mux
}

// AdminHandler serves Go's profiles under /debug/pprof/ (index, cmdline,
// profile, symbol, trace and the named profiles): what Run serves on the
// admin address.
func AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler wraps h with /healthz, /readyz, /livez, /metrics (unless
// MetricsOnAdmin) and request metrics. Run uses it; it is exported for tests that serve
// through httptest.
func Handler(cfg Config, h http.Handler) http.Handler {
	cfg.setDefaults()
	reg := cfg.Registry
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total", Help: "HTTP requests served, by path and status code.",
	}, []string{"path", "code"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "http_request_duration_seconds", Help: "Time to serve a request, by path.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 100 µs .. 13 s
	}, []string{"path"})
	reg.MustRegister(requests, latency)

	mux := http.NewServeMux()
	notReady := &notReadyLog{log: cfg.Logger, service: cfg.Name}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Ready != nil {
			if err := cfg.Ready(); err != nil {
				notReady.note(err)
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ok\n"))
	})
	// /livez answers while the process serves HTTP, whatever its
	// dependencies: a liveness probe must not restart an instance because
	// its database is down, which a restart does not mend (and, for a
	// replica, costs a full load once the database is back).
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		for _, check := range []struct {
			f    func() error
			what string
		}{{cfg.Ready, "not ready"}, {cfg.Fresh, "stale"}} {
			if check.f == nil {
				continue
			}
			if err := check.f(); err != nil {
				notReady.note(err)
				http.Error(w, check.what, http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ok\n"))
	})
	if !cfg.MetricsOnAdmin {
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	}
	mux.Handle("/", h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		if serviceOwn(r.URL.Path) {
			// What the mux would do, without its match: its catch-all
			// "/" takes every such path, and matching one of two
			// segments or more allocates, on every request of every
			// service (a seventh of a catalog request's allocations).
			r.Pattern = "/"
			h.ServeHTTP(rec, r)
		} else {
			mux.ServeHTTP(rec, r)
		}
		pattern := pathLabel(r)
		requests.WithLabelValues(pattern, strconv.Itoa(rec.code)).Inc()
		latency.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
	})
}

// pathLabel is a served request's path label in the request metrics:
// the pattern that matched (ServeMux sets it on r), so that unknown
// paths cannot blow up the label set.
func pathLabel(r *http.Request) string {
	if r.Pattern == "" {
		return "unmatched"
	}
	return r.Pattern
}

// serviceOwn reports whether path is one that Handler's mux would hand
// to the service as it is: not one of the paths the server answers
// itself, and clean (no "//", "/." or "/.." the mux would redirect).
func serviceOwn(path string) bool {
	switch path {
	case "/healthz", "/livez", "/readyz", "/metrics":
		return false
	}
	return strings.HasPrefix(path, "/") && !strings.Contains(path, "//") && !strings.Contains(path, "/.")
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// LiftTimeouts lifts the read and write timeouts for the request w
// answers, for a handler that streams or upgrades the connection
// (WebSocket, long poll): call it before writing or hijacking. The
// handler then bounds its own reads and writes.
func LiftTimeouts(w http.ResponseWriter) error {
	rc := http.NewResponseController(w)
	return errors.Join(rc.SetReadDeadline(time.Time{}), rc.SetWriteDeadline(time.Time{}))
}

// RegisterFlags adds the flags every "hlab serve NAME" shares to fs:
// --admin-addr, --read-timeout and --write-timeout. Their defaults are c's
// fields as set (a service whose handlers run long by design sets
// WriteTimeout negative first); a flag given as 0 turns its timeout off.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.AdminAddr, "admin-addr", c.AdminAddr, "address serving Go's profiles, /debug/pprof/, e.g. 127.0.0.1:6060 (keep it on loopback: /debug/pprof/cmdline shows the flags; empty: none). Never served on the service's address")
	fs.Var(timeoutFlag{&c.ReadTimeout, DefaultReadTimeout}, "read-timeout", "bound on reading a request, headers and body, from its first byte; a client trickling its body is cut off (0: none)")
	fs.Var(timeoutFlag{&c.WriteTimeout, DefaultWriteTimeout}, "write-timeout", "bound on answering a request, from the end of its headers to the answer's last byte; past it the connection is closed (0: none)")
}

// timeoutFlag is a Config timeout as a flag: 0 means none (negative in
// Config, whose zero is the default).
type timeoutFlag struct {
	d   *time.Duration
	def time.Duration
}

func (f timeoutFlag) String() string {
	switch {
	case f.d == nil:
		return ""
	case *f.d < 0:
		return "0s"
	case *f.d == 0:
		return f.def.String()
	}
	return f.d.String()
}

func (f timeoutFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return errors.New("give a duration like 30s, or 0 for none")
	}
	if d == 0 {
		d = -1
	}
	*f.d = d
	return nil
}

// notReadyLog logs why /healthz answers "not ready": the first time, each
// time the reason changes, and at most every notReadyEvery while it stays
// (a load balancer asks every few seconds).
type notReadyLog struct {
	log     *slog.Logger
	service string

	mu   sync.Mutex
	last string
	at   time.Time
}

const notReadyEvery = 30 * time.Second

func (n *notReadyLog) note(err error) {
	msg := err.Error()
	n.mu.Lock()
	defer n.mu.Unlock()
	if msg == n.last && time.Since(n.at) < notReadyEvery {
		return
	}
	n.last, n.at = msg, time.Now()
	n.log.Warn("not ready", "service", n.service, "err", msg)
}
