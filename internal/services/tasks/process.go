package tasks

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/server"
)

// Process is "hlab serve tasks": flags, the file-descriptor limit, the
// service under the shared server, and a graceful stop.
type Process struct {
	// Server is the shared server's configuration: its address (or
	// listener), admin address and timeouts. Run sets its name, registry,
	// logger and readiness. The WebSocket lifts the timeouts for itself.
	Server server.Config
	Config Config

	secretFile   string
	logFormat    string
	drainTimeout time.Duration
	// The optimization switches, on by default (Config.Deopt is their negation).
	poolLimits, indexes, noDefaultTx, noUserTouch, workerQueue bool
}

// RegisterFlags adds the service's flags to fs; addrFlag names the listen
// address flag.
func (p *Process) RegisterFlags(fs *flag.FlagSet, addrFlag string) {
	c := &p.Config
	fs.StringVar(&p.Server.Addr, addrFlag, "127.0.0.1:8080", "address to listen on (the API, /healthz and /metrics)")
	p.Server.RegisterFlags(fs)
	fs.StringVar(&c.DatabaseURL, "dsn", os.Getenv("DATABASE_URL"), "Postgres connection string, e.g. postgres://postgres@127.0.0.1:5432/tasks (default $DATABASE_URL)")
	fs.BoolVar(&p.poolLimits, "pool-limits", true, "optimization 1: bounded connection pool (false: database/sql defaults, unlimited connections, 2 idle)")
	fs.BoolVar(&p.indexes, "indexes", true, "optimization 3: indexes on the JOIN and ORDER BY columns (false: drop them)")
	fs.BoolVar(&p.noUserTouch, "no-user-touch", true, "optimization 4: no per-request user-row update (false: the report's bug, a transaction around every request updating the user row)")
	fs.BoolVar(&p.noDefaultTx, "no-default-tx", true, "optimization 5: no transaction around single write statements (false: each write in its own transaction, like GORM's default)")
	fs.BoolVar(&p.workerQueue, "worker-queue", true, "optimization 7: bounded queue with --workers for side jobs (false: a goroutine per job)")
	fs.Func("max-conns", fmt.Sprintf("pool: most connections (default %d)", DefaultMaxConns), intFlag(&c.MaxConns))
	fs.Func("min-conns", fmt.Sprintf("pool: connections kept open (default %d)", DefaultMinConns), intFlag(&c.MinConns))
	fs.DurationVar(&c.MaxConnIdleTime, "max-idle-time", DefaultMaxConnIdleTime, "pool: close connections idle this long")
	fs.DurationVar(&c.MaxConnLifetime, "max-lifetime", DefaultMaxConnLifetime, "pool: replace connections this old")
	fs.StringVar(&c.WebhookURL, "webhook-url", "", "push notifications are POSTed here (empty: off)")
	fs.IntVar(&c.QueueSize, "queue-size", DefaultQueueSize, "notification jobs queued at most; more are dropped and counted")
	fs.IntVar(&c.Workers, "workers", DefaultWorkers, "notification workers")
	fs.DurationVar(&c.NotifyTimeout, "notify-timeout", DefaultNotifyTimeout, "timeout of one webhook call")
	fs.IntVar(&c.NotifyRetries, "notify-retries", DefaultNotifyRetries, "retries of a failed webhook call (negative: none)")
	fs.StringVar(&p.secretFile, "token-secret-file", "", "file holding the token signing secret (default $TASKS_TOKEN_SECRET, else random per start)")
	fs.DurationVar(&c.TokenTTL, "token-ttl", DefaultTokenTTL, "how long a token is valid")
	fs.IntVar(&c.BcryptCost, "bcrypt-cost", 10, "password hash cost (4-31; each step doubles the time)")
	fs.Float64Var(&c.LoginIPRate, "login-ip-rate", DefaultLoginIPRate,
		"login attempts a minute per client address (IPv6: per /64), right or wrong; past --login-ip-burst at once, login answers 429 with Retry-After. "+
			"Behind a proxy every client has the proxy's address: raise it there. 0: no limit (a load test signing in many accounts from one machine)")
	fs.IntVar(&c.LoginIPBurst, "login-ip-burst", DefaultLoginIPBurst, "login attempts one client address may make at once before --login-ip-rate applies")
	fs.Float64Var(&c.LoginAccountRate, "login-account-rate", DefaultLoginAccountRate,
		"login attempts a minute per account (email), right or wrong, from any address: bounds password guessing; past --login-account-burst at once, 429 with Retry-After. 0: no limit")
	fs.IntVar(&c.LoginAccountBurst, "login-account-burst", DefaultLoginAccountBurst, "login attempts for one account at once before --login-account-rate applies")
	fs.IntVar(&c.MaxWebSocketsPerUser, "max-websockets-per-user", DefaultMaxWebSocketsPerUser,
		"open WebSockets per user on this process (one per device); one more is refused with 429 and Retry-After until one closes. 0: no bound")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", DefaultMaxBodyBytes, "largest request body")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", DefaultRequestTimeout, "bound on a request's database work")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "export sampled traces over OTLP/HTTP to host:port or a URL (default $OTEL_EXPORTER_OTLP_ENDPOINT; none: no export)")
	fs.Float64Var(&c.TraceSample, "trace-sample", DefaultTraceSample, "share of requests traced (0-1; negative: none)")
	fs.BoolVar(&c.AccessLog, "access-log", false, "log every request (default: 5xx and slow ones)")
	fs.StringVar(&p.logFormat, "log-format", "json", "log format: json or text")
	fs.DurationVar(&p.drainTimeout, "drain-timeout", 10*time.Second, "how long shutdown waits for queued notifications")
}

func intFlag(v *int32) func(string) error {
	return func(s string) error {
		var n int32
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			return fmt.Errorf("give a positive number")
		}
		*v = n
		return nil
	}
}

// Run serves until ctx ends, then stops gracefully.
func (p *Process) Run(ctx context.Context, logger *slog.Logger) error {
	switch p.logFormat {
	case "json":
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	case "text":
	default:
		return fmt.Errorf("tasks: --log-format %q: use json or text", p.logFormat)
	}
	c := p.Config
	c.Logger = logger
	if c.TraceSample == 0 {
		c.TraceSample = -1 // --trace-sample 0 means none
	}
	c.Deopt = Deopt{
		NoPoolLimits: !p.poolLimits, NoIndexes: !p.indexes, DefaultTx: !p.noDefaultTx,
		UserTouch: !p.noUserTouch, GoroutinePerJob: !p.workerQueue,
	}
	if c.NotifyRetries == 0 {
		c.NotifyRetries = -1 // --notify-retries 0 means none
	}
	// 0 means no limit (in Config, 0 is the default and -1 none).
	for _, rate := range []*float64{&c.LoginIPRate, &c.LoginAccountRate} {
		if *rate == 0 {
			*rate = -1
		}
	}
	if c.MaxWebSocketsPerUser == 0 {
		c.MaxWebSocketsPerUser = -1
	}
	switch {
	case p.secretFile != "":
		b, err := os.ReadFile(p.secretFile)
		if err != nil {
			return fmt.Errorf("tasks: --token-secret-file: %w", err)
		}
		c.TokenSecret = bytes.TrimSpace(b)
	case os.Getenv("TASKS_TOKEN_SECRET") != "":
		c.TokenSecret = []byte(os.Getenv("TASKS_TOKEN_SECRET"))
	}
	if quota, procs := FitGOMAXPROCS(); quota > 0 {
		logger.Info("CPU quota", "cpus", quota, "gomaxprocs", procs)
	}
	soft, hard, err := RaiseFileLimit(WantFileLimit)
	if err != nil {
		logger.Warn("open-file limit", "soft", soft, "hard", hard, "err", err)
	} else {
		logger.Info("open-file limit", "soft", soft, "hard", hard)
	}
	reg := c.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		c.Registry = reg
	}
	s, err := New(ctx, c)
	if err != nil {
		return err
	}
	srv := p.Server
	srv.Name, srv.Registry, srv.Logger = "tasks", reg, logger
	srv.Ready = func() error {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return s.Ready(rctx)
	}
	runErr := server.Run(ctx, srv, s.Handler())
	dctx, cancel := context.WithTimeout(context.Background(), p.drainTimeout)
	defer cancel()
	if err := s.Close(dctx); err != nil {
		logger.Warn("shutdown", "err", err)
	}
	return runErr
}
