package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Service is the task API. New builds it, Handler serves it, Close stops
// its background work.
type Service struct {
	cfg        Config
	log        *slog.Logger
	pool       pool
	store      *store
	hub        *hub
	events     *eventBus // nil under EventsLocal
	notifier   *notifier
	outbox     *outbox // nil unless Config.NotifyOutbox
	tokens     *tokenSigner
	hasher     *hasher
	m          *metrics
	tp         *sdktrace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	handler    http.Handler

	// Login attempts per client address and per account, sign-ups per
	// client address and on the whole service (ratelimit.go).
	loginsByAddr, loginsByAccount buckets
	signupsByAddr, signups        buckets
	trustedProxies                []netip.Prefix // whose X-Forwarded-For is believed
}

// New migrates the database, opens the connection pool and starts the
// notification workers.
func New(ctx context.Context, cfg Config) (_ *Service, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: slog.New(traceLogs{cfg.Logger.Handler()}), propagator: propagator}
	if s.trustedProxies, err = parseTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, err
	}
	var exporting bool
	if s.tp, exporting, err = newTracing(ctx, &s.cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.tp.Shutdown(context.WithoutCancel(ctx))
		}
	}()
	s.tracer = s.tp.Tracer("github.com/highload-lab/hlab/internal/services/tasks")
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	tracer := dbTracer{s.tracer}
	if cfg.Deopt.NoPoolLimits {
		s.pool, err = newUnboundedPool(&s.cfg, tracer)
	} else {
		s.pool, err = newBoundedPool(ctx, &s.cfg, tracer)
	}
	if err != nil {
		return nil, err
	}
	s.store = &store{pool: s.pool, defaultTx: cfg.Deopt.DefaultTx}
	if s.tokens, err = newTokenSigner(cfg.TokenSecret, cfg.TokenTTL, cfg.TokenAudience); err != nil {
		s.pool.close()
		return nil, err
	}
	if s.hasher, err = newHasher(cfg.BcryptCost, runtime.GOMAXPROCS(0)); err != nil {
		s.pool.close()
		return nil, err
	}
	s.loginsByAddr = s.newBuckets("login_address", cfg.LoginIPRate, cfg.LoginIPBurst)
	s.loginsByAccount = s.newBuckets("login_account", cfg.LoginAccountRate, cfg.LoginAccountBurst)
	s.signupsByAddr = s.newBuckets("signup_address", cfg.SignupIPRate, cfg.SignupIPBurst)
	s.signups = s.newBuckets("signup", cfg.SignupRate, cfg.SignupBurst)
	s.m = newMetrics(cfg.Registry, s.pool)
	s.hub = newHub(cfg.Registry, cfg.MaxWebSocketsPerUser, cfg.MaxWebSockets)
	if cfg.Events == EventsPostgres {
		s.store.recorders = append(s.store.recorders, eventLog{})
		if s.events, err = startEventBus(ctx, &s.cfg, s.log, s.store, s.hub); err != nil {
			s.pool.close()
			return nil, err
		}
	}
	s.notifier = newNotifier(&s.cfg, s.store.devicesOf, cfg.Registry, s.log)
	if cfg.NotifyOutbox {
		s.outbox = newOutbox(&s.cfg, s.notifier, s.store, cfg.Registry, s.log)
	}
	s.handler = s.routes()

	if cfg.WebhookURL != "" && cfg.WebhookSecret == "" {
		s.log.Warn("webhook requests are unsigned: anyone who reaches the webhook can post it notifications; give --webhook-secret-file (or $TASKS_WEBHOOK_SECRET) and check "+SignatureHeader+" there", "webhook", webhookLabel(cfg.WebhookURL))
	}
	d := cfg.Deopt
	s.log.Info("tasks service ready",
		"pool_limits", !d.NoPoolLimits, "telemetry_cap", !d.UncappedTelemetry, "indexes", !d.NoIndexes, "no_default_tx", !d.DefaultTx,
		"no_user_touch", !d.UserTouch, "raise_file_limit", !d.KeepFileLimit, "worker_queue", !d.GoroutinePerJob,
		"max_conns", poolMax(&s.cfg), "workers", cfg.Workers, "queue", cfg.QueueSize,
		"webhook", cfg.WebhookURL != "", "notify_outbox", cfg.NotifyOutbox, "trace_sample", s.cfg.TraceSample, "otlp_export", exporting,
		"gomaxprocs", runtime.GOMAXPROCS(0), "random_token_secret", len(cfg.TokenSecret) == 0, "token_audience", cfg.TokenAudience,
		"login_limit_per_address", limitText(cfg.LoginIPRate, cfg.LoginIPBurst),
		"login_limit_per_account", limitText(cfg.LoginAccountRate, cfg.LoginAccountBurst),
		"signup_limit_per_address", limitText(cfg.SignupIPRate, cfg.SignupIPBurst),
		"signup_limit", limitText(cfg.SignupRate, cfg.SignupBurst), "login_limits", cfg.LoginLimits, "trusted_proxies", cfg.TrustedProxies,
		"max_websockets_per_user", cfg.MaxWebSocketsPerUser, "max_websockets", cfg.MaxWebSockets,
		"max_devices_per_user", cfg.MaxDevicesPerUser, "events", cfg.Events, "event_retention", cfg.EventRetention)
	return s, nil
}

// limitText describes a login limit for the start's log line.
func limitText(perMinute float64, burst int) string {
	if perMinute < 0 {
		return "none"
	}
	return fmt.Sprintf("%d at once, %g a minute", burst, perMinute)
}

func poolMax(c *Config) string {
	if c.Deopt.NoPoolLimits {
		return "unlimited (2 idle)"
	}
	return fmt.Sprint(c.MaxConns)
}

// migrate applies the migrations, then reverts the indexes when asked.
func (s *Service) migrate(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("tasks: connect to the database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var skip []string
	if s.cfg.Deopt.NoIndexes {
		skip = IndexMigrations()
	}
	applied, err := MigrateExcept(ctx, conn, skip...)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		s.log.Info("migrations applied", "versions", applied)
	}
	if s.cfg.Deopt.NoIndexes {
		var dropped []string
		for _, name := range IndexMigrations() {
			reverted, err := Revert(ctx, conn, name)
			if err != nil {
				return err
			}
			if reverted {
				dropped = append(dropped, name)
			}
		}
		s.log.Warn("running without the indexes on the columns the task GET joins, the lists order by and devices are found by (--indexes=false)", "dropped_now", dropped)
	}
	return nil
}

// Handler serves the API (without /healthz and /metrics, which the shared
// server adds).
func (s *Service) Handler() http.Handler { return s.handler }

// Ready reports whether the service can take traffic: whether the database
// answers.
func (s *Service) Ready(ctx context.Context) error {
	return s.store.read(ctx, func(q dbtx) error {
		_, err := q.Exec(ctx, ";")
		return err
	})
}

// Close disconnects WebSockets, delivers the queued notifications until
// ctx ends, closes the pool and flushes traces.
func (s *Service) Close(ctx context.Context) error {
	s.hub.close()
	if s.events != nil {
		s.events.stop()
	}
	err := s.notifier.stop(ctx)
	s.pool.close()
	return errors.Join(err, s.tp.Shutdown(ctx))
}
