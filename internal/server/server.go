// Package server runs an hlab service's HTTP handler with what every service
// shares: GET /healthz, Prometheus GET /metrics, per-route request metrics,
// bounded timeouts, and a graceful shutdown when the context ends (SIGTERM).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
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
	// ReadHeaderTimeout bounds how long a client may take to send request
	// headers (default 10s): a slow client must not hold a connection forever.
	ReadHeaderTimeout time.Duration
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
	// 503 with the error's text while it returns non-nil (default: always ready).
	Ready func() error
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = "service"
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8080"
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Run serves h (with /healthz and /metrics added) until ctx is done, then
// shuts down gracefully. It returns nil after a clean shutdown.
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
	srv := &http.Server{
		Handler:           Handler(cfg, h),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
	}
	cfg.Logger.Info("listening", "service", cfg.Name, "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("server: %s stopped: %w", cfg.Name, err)
	case <-ctx.Done():
	}
	cfg.Logger.Info("shutting down", "service", cfg.Name)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("server: %s did not shut down within %s: %w", cfg.Name, cfg.ShutdownTimeout, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler wraps h with /healthz, /metrics and request metrics. Run uses it;
// it is exported for tests that serve through httptest.
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
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Ready != nil {
			if err := cfg.Ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/", h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(rec, r)
		// The path label is the pattern that matched (ServeMux sets it on
		// r), so unknown paths cannot blow up the label set.
		pattern := r.Pattern
		if pattern == "" {
			pattern = "unmatched"
		}
		requests.WithLabelValues(pattern, strconv.Itoa(rec.code)).Inc()
		latency.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
	})
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
