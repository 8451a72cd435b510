package tasks

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/secretfile"
	"github.com/highload-lab/hlab/internal/server"
)

// DefaultDrainTimeout bounds the wait for queued notifications on
// shutdown.
const DefaultDrainTimeout = 10 * time.Second

// Options is what "hlab serve tasks" takes beyond the shared server's
// flags: the service's Config and the process's own settings.
type Options struct {
	Config
	// SecretFile holds the token signing secret (default
	// $TASKS_TOKEN_SECRET, else random per start).
	SecretFile string
	// LogFormat is json (the default) or text.
	LogFormat string
	// DrainTimeout bounds the wait for queued notifications on shutdown
	// (default 10s).
	DrainTimeout time.Duration
	// PublicMetrics serves /metrics on the service's address, which
	// clients reach, instead of the admin address only.
	PublicMetrics bool
}

// RegisterFlags adds the service's flags to fs.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	c, d := &o.Config, &o.Config.Deopt
	cliflag.SecretVar(fs, &c.DatabaseURL, "dsn", "DATABASE_URL", "Postgres connection string, e.g. postgres://tasks:PASSWORD@127.0.0.1:5432/tasks; give the service a role of its own that owns its database, not a superuser")
	fs.Var(cliflag.Not(&d.NoPoolLimits), "pool-limits", "optimization 1: bounded connection pool (false: database/sql defaults, unlimited connections, 2 idle)")
	fs.Var(cliflag.Not(&d.UncappedTelemetry), "telemetry-cap", "optimization 2: a capped telemetry budget, --trace-sample of requests traced and spans dropped when the export queue is full "+
		"(false: every request traced, and a full export queue makes requests wait; the queue stays bounded)")
	fs.Var(cliflag.Not(&d.NoIndexes), "indexes", "optimization 3: indexes on the JOIN and ORDER BY columns (false: drop them)")
	fs.Var(cliflag.Not(&d.UserTouch), "no-user-touch", "optimization 4: no per-request user-row update (false: the report's bug, a transaction around every request updating the user row)")
	fs.Var(cliflag.Not(&d.DefaultTx), "no-default-tx", "optimization 5: no transaction around single write statements (false: each write in its own transaction, like GORM's default)")
	fs.Var(cliflag.Not(&d.KeepFileLimit), "raise-file-limit", fmt.Sprintf("optimization 6: raise the open-file limit at start (false: keep the soft limit at %d, so that past about %d sockets accept and dial fail with \"too many open files\")", LowFileLimit, LowFileLimit))
	fs.Var(cliflag.Not(&d.GoroutinePerJob), "worker-queue", "optimization 7: bounded queue with --workers for side jobs (false: a goroutine per job)")
	fs.Var(cliflag.AtLeast(&c.MaxConns, 1), "max-conns", fmt.Sprintf("pool: most connections (default %d)", DefaultMaxConns))
	fs.Var(cliflag.AtLeast(&c.MinConns, 1), "min-conns", fmt.Sprintf("pool: connections kept open (default %d)", DefaultMinConns))
	fs.DurationVar(&c.MaxConnIdleTime, "max-idle-time", DefaultMaxConnIdleTime, "pool: close connections idle this long")
	fs.DurationVar(&c.MaxConnLifetime, "max-lifetime", DefaultMaxConnLifetime, "pool: replace connections this old")
	cliflag.SecretVar(fs, &c.WebhookURL, "webhook-url", "TASKS_WEBHOOK_URL", "push notifications are POSTed here, redirects not followed (empty: off); logs show it without its query and user info, which may hold a token")
	cliflag.SecretVar(fs, &c.WebhookSecret, "webhook-secret", "TASKS_WEBHOOK_SECRET", "key that signs each webhook request (header "+SignatureHeader+": t=UNIX,v1=HMAC-SHA256 of UNIX.BODY); the receiver checks it with the same key (empty: unsigned, with a warning at start)")
	fs.IntVar(&c.QueueSize, "queue-size", DefaultQueueSize, "notification jobs queued at most; more are dropped and counted")
	fs.IntVar(&c.Workers, "workers", DefaultWorkers, "notification workers")
	fs.DurationVar(&c.NotifyTimeout, "notify-timeout", DefaultNotifyTimeout, "timeout of one webhook call")
	fs.IntVar(&c.NotifyRetries, "notify-retries", DefaultNotifyRetries, "retries of a failed webhook call, in place, by the in-memory queue (negative: none); --notify-outbox retries by --notify-outbox-retries instead")
	fs.IntVar(&c.NotifyMaxBatchBytes, "notify-max-batch-bytes", DefaultNotifyMaxBatchBytes, "largest webhook body: a batch over it goes in several calls; a call answered 413 is split until only the notification refused fails")
	// The notification outbox (outbox.go).
	fs.BoolVar(&c.NotifyOutbox, "notify-outbox", false,
		"notifications that survive a crash: each is written to the notify_outbox table in the transaction of its change, and workers deliver it at least once, "+
			"retried with backoff, kept as failed after --notify-outbox-retries (false: optimization 7's in-memory queue, which a crash or a full queue loses). "+
			"Costs an INSERT in every task write's transaction and a claim and a delete per batch; turn it on when a lost push matters, or with more than one instance")
	fs.IntVar(&c.NotifyOutboxRetries, "notify-outbox-retries", DefaultNotifyOutboxRetries, "with --notify-outbox: failed attempts rescheduled (backoff from 100ms doubled, at most 1m) before a notification is kept as failed (0: none)")
	fs.DurationVar(&c.NotifyOutboxPoll, "notify-outbox-poll", DefaultNotifyOutboxPoll, "with --notify-outbox: how often idle workers look for rows of other instances or of a crashed process (this process's changes wake them at once)")
	fs.IntVar(&c.MaxDevicesPerUser, "max-devices-per-user", DefaultMaxDevicesPerUser, "devices one user may register (each notification carries them all); one more is refused with 409. 0: no bound")
	fs.StringVar(&o.SecretFile, "token-secret-file", "", "file holding the token signing secret (default $TASKS_TOKEN_SECRET, else random per start)")
	fs.DurationVar(&c.TokenTTL, "token-ttl", DefaultTokenTTL, "how long a token is valid")
	fs.StringVar(&c.TokenAudience, "token-audience", "", "the deployment tokens are bound to: one signed for another audience is refused, even under the same secret (default: the database's host:port/name, which the instances of one deployment share)")
	fs.IntVar(&c.BcryptCost, "bcrypt-cost", 10, "password hash cost (4-31; each step doubles the time)")
	// Where the login limits hold, and whose client address counts.
	fs.Var(cliflag.Text(&c.LoginLimits), "login-limits", "where the login and sign-up buckets live: "+LimitsProcess+" (each instance its own: N instances allow N times every limit below) or "+
		LimitsPostgres+" (shared through the database, one statement per attempt: the limits hold for the whole cluster; use it with more than one instance) (default "+LimitsProcess+")")
	fs.Var(cliflag.List(&c.TrustedProxies), "trusted-proxies", "balancers and proxies (CIDRs or addresses, comma-separated) whose X-Forwarded-For is believed: the client is the rightmost address in it that is not one of them. "+
		"Without it the client is the connection's peer, so behind a balancer every client shares the balancer's address and its limits. A header from any other peer is ignored")
	fs.Float64Var(&c.LoginIPRate, "login-ip-rate", DefaultLoginIPRate,
		"login attempts a minute per client address (IPv6: per /64), right or wrong; past --login-ip-burst at once, login answers 429 with Retry-After. "+
			"Behind a proxy give --trusted-proxies, or every client has the proxy's address. 0: no limit (a load test signing in many accounts from one machine)")
	fs.IntVar(&c.LoginIPBurst, "login-ip-burst", DefaultLoginIPBurst, "login attempts one client address may make at once before --login-ip-rate applies")
	fs.Float64Var(&c.LoginAccountRate, "login-account-rate", DefaultLoginAccountRate,
		"login attempts a minute per account (email), right or wrong, from any address: bounds password guessing; past --login-account-burst at once, 429 with Retry-After. "+
			"Per instance with --login-limits "+LimitsProcess+" (three instances behind a balancer allow a guesser three times it), for the cluster with "+LimitsPostgres+". 0: no limit")
	fs.IntVar(&c.LoginAccountBurst, "login-account-burst", DefaultLoginAccountBurst, "login attempts for one account at once before --login-account-rate applies")
	fs.Float64Var(&c.SignupIPRate, "signup-ip-rate", DefaultSignupIPRate,
		"sign-ups a minute per client address (IPv6: per /64), checked before the password is hashed; past --signup-ip-burst at once, 429 with Retry-After. Behind a proxy every client has the proxy's address: raise it there. 0: no limit")
	fs.IntVar(&c.SignupIPBurst, "signup-ip-burst", DefaultSignupIPBurst, "sign-ups one client address may make at once before --signup-ip-rate applies")
	fs.Float64Var(&c.SignupRate, "signup-rate", DefaultSignupRate,
		"sign-ups a minute on this process, every address together: bounds the bcrypt time and the accounts many addresses can take; past --signup-burst at once, 429 with Retry-After. 0: no limit")
	fs.IntVar(&c.SignupBurst, "signup-burst", DefaultSignupBurst, "sign-ups this process takes at once before --signup-rate applies")
	fs.IntVar(&c.MaxWebSockets, "max-websockets", DefaultMaxWebSockets, "open WebSockets on this process, every user's together; one more is refused with 503 and Retry-After. 0: no bound")
	fs.IntVar(&c.MaxWebSocketsPerUser, "max-websockets-per-user", DefaultMaxWebSocketsPerUser,
		"open WebSockets per user on this process (one per device); one more is refused with 429 and Retry-After until one closes. 0: no bound")
	// Task events across instances.
	fs.StringVar(&c.Events, "events", EventsLocal, "how task events reach WebSockets: "+EventsLocal+" (report C's: only the sockets of the instance that made the change; "+
		"no resume) or "+EventsPostgres+" (every change also writes its event to an event log in Postgres in its own transaction: BEGIN, the write, the log's statement, COMMIT, "+
		"three more round trips to Postgres per write, "+
		"and NOTIFYs it, and one user's changes commit one after another, their numbering locking the user's counter row until commit; "+
		"each instance holds one more connection that LISTENs, and delivers every user's events to its sockets in commit order; a device "+
		"resumes with GET /v1/ws?after_seq=SEQ). Set "+EventsPostgres+" on every instance when you run more than one behind a balancer, or when devices must not miss events across reconnects")
	fs.DurationVar(&c.EventRetention, "event-retention", DefaultEventRetention, "with --events "+EventsPostgres+": how long the event log keeps an event; older ones are deleted "+
		"in batches of 5,000 a few times per window, and a device resuming from before them is told to list its tasks again (close 4002)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", DefaultMaxBodyBytes, "largest request body")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", DefaultRequestTimeout, "bound on a request's database work")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "export sampled traces over OTLP/HTTP to host:port or a URL (default $OTEL_EXPORTER_OTLP_ENDPOINT; none: no export)")
	fs.Float64Var(&c.TraceSample, "trace-sample", DefaultTraceSample, "share of requests traced (0-1; negative: none)")
	fs.BoolVar(&c.AccessLog, "access-log", false, "log every request (default: 5xx and slow ones)")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.BoolVar(&o.PublicMetrics, "public-metrics", false, "serve /metrics on --addr, where clients connect (default: on --admin-addr only, since they tell the load, routes and internals to whoever reaches them)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", DefaultDrainTimeout, "how long shutdown waits for queued notifications")
}

// Command returns the command that makes "hlab serve tasks" run o: the
// flags o changes from the defaults, and its secrets (the database and
// webhook URLs, the webhook key) for the environment.
func (o Options) Command() cliflag.Command { return cliflag.CommandOf(o) }

// Serve runs the service under the shared server srv until ctx ends, then
// stops gracefully: "hlab serve tasks". It logs to srv.Logger, or as JSON
// to stderr with LogFormat json.
func Serve(ctx context.Context, srv server.Config, o Options) error {
	logger := cmp.Or(srv.Logger, slog.Default())
	switch cmp.Or(o.LogFormat, "json") {
	case "json":
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	case "text":
	default:
		return fmt.Errorf("tasks: --log-format %q: use json or text", o.LogFormat)
	}
	c := o.Config
	c.Logger = logger
	if c.TraceSample == 0 {
		c.TraceSample = -1 // --trace-sample 0 means none
	}
	if c.NotifyRetries == 0 {
		c.NotifyRetries = -1 // --notify-retries 0 means none
	}
	if c.NotifyOutboxRetries == 0 {
		c.NotifyOutboxRetries = -1
	}
	// 0 means no limit (in Config, 0 is the default and -1 none).
	for _, rate := range []*float64{&c.LoginIPRate, &c.LoginAccountRate, &c.SignupIPRate, &c.SignupRate} {
		if *rate == 0 {
			*rate = -1
		}
	}
	if c.MaxWebSocketsPerUser == 0 {
		c.MaxWebSocketsPerUser = -1
	}
	if c.MaxWebSockets == 0 {
		c.MaxWebSockets = -1
	}
	if c.MaxDevicesPerUser == 0 {
		c.MaxDevicesPerUser = -1
	}
	switch {
	case o.SecretFile != "":
		b, err := secretfile.Read(o.SecretFile)
		if err != nil {
			return fmt.Errorf("tasks: --token-secret-file: %w", err)
		}
		c.TokenSecret = []byte(b)
	case os.Getenv("TASKS_TOKEN_SECRET") != "":
		c.TokenSecret = []byte(os.Getenv("TASKS_TOKEN_SECRET"))
	}
	if quota, procs := FitGOMAXPROCS(); quota > 0 {
		logger.Info("CPU quota", "cpus", quota, "gomaxprocs", procs)
	}
	raise := func() (uint64, uint64, error) { return RaiseFileLimit(WantFileLimit) }
	if c.Deopt.KeepFileLimit {
		raise = func() (uint64, uint64, error) { return LowerFileLimit(LowFileLimit) }
	}
	soft, hard, err := raise()
	if err != nil {
		logger.Warn("open-file limit", "soft", soft, "hard", hard, "err", err)
	} else {
		logger.Info("open-file limit", "soft", soft, "hard", hard, "raised", !c.Deopt.KeepFileLimit)
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
	srv.Name, srv.Registry, srv.Logger = "tasks", reg, logger
	srv.MetricsOnAdmin = !o.PublicMetrics
	srv.Ready = func() error {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return s.Ready(rctx)
	}
	runErr := server.Run(ctx, srv, s.Handler())
	dctx, cancel := context.WithTimeout(context.Background(), cmp.Or(o.DrainTimeout, DefaultDrainTimeout))
	defer cancel()
	if err := s.Close(dctx); err != nil {
		logger.Warn("shutdown", "err", err)
	}
	return runErr
}
