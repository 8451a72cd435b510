package tasks

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/highload-lab/hlab/internal/defaults"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxConns        = 16
	DefaultMinConns        = 2
	DefaultMaxConnIdleTime = time.Minute
	DefaultMaxConnLifetime = 30 * time.Minute
	DefaultQueueSize       = 4096
	DefaultWorkers         = 8
	DefaultNotifyTimeout   = 2 * time.Second
	DefaultNotifyRetries   = 2
	DefaultNotifyBackoff   = 100 * time.Millisecond
	DefaultTokenTTL        = 24 * time.Hour
	DefaultMaxBodyBytes    = 64 << 10
	DefaultRequestTimeout  = 5 * time.Second
	DefaultTraceSample     = 0.01
	// Login attempts: per account, 10 at once and 10 a minute; per client
	// address, 100 at once (a load test signing 100 accounts in from one
	// machine) and 60 a minute.
	DefaultLoginAccountRate  = 10
	DefaultLoginAccountBurst = 10
	DefaultLoginIPRate       = 60
	DefaultLoginIPBurst      = 100
	// Sign-ups: per client address, 10 at once and 10 a minute; on the
	// whole service, 100 at once and 600 a minute (10 a second, half a
	// core of bcrypt at cost 10 at most).
	DefaultSignupIPRate  = 10
	DefaultSignupIPBurst = 10
	DefaultSignupRate    = 600
	DefaultSignupBurst   = 100
	// DefaultMaxWebSockets bounds the WebSockets of one process, all
	// users together: each holds a goroutine, buffers and a descriptor.
	DefaultMaxWebSockets = 10000
	// DefaultMaxWebSocketsPerUser bounds a user's WebSockets: a device
	// each, with room for a few phones, tablets and browser tabs.
	DefaultMaxWebSocketsPerUser = 8
	// DefaultMaxDevicesPerUser bounds a user's registered devices: every
	// notification of theirs carries them all.
	DefaultMaxDevicesPerUser = 10
	// DefaultNotifyMaxBatchBytes bounds one webhook call's body: a
	// worker's batch over it goes in several calls.
	DefaultNotifyMaxBatchBytes = 1 << 20
	// DefaultEventRetention is how long the event log of EventsPostgres
	// keeps events: a phone off for a night resumes without listing.
	DefaultEventRetention = 24 * time.Hour
	// unboundedMaxIdle is database/sql's default MaxIdleConns, what an
	// ORM on database/sql keeps when nobody sets pool limits.
	unboundedMaxIdle = 2
)

// Defaults of the notification outbox (Config.NotifyOutbox).
const (
	DefaultNotifyOutboxRetries = 12
	DefaultNotifyOutboxPoll    = time.Second
)

// Deopt turns report C's optimizations off, one by one, to measure what
// each was worth. The zero value is the optimized service.
type Deopt struct {
	// NoPoolLimits uses database/sql's defaults instead of a bounded
	// pool: unlimited open connections, 2 kept idle, no idle time or
	// lifetime. Under concurrency most requests open a connection and
	// close it after (the report's "too many connections").
	NoPoolLimits bool
	// UncappedTelemetry lifts report C's optimization 2, the telemetry
	// budget: every request is traced (TraceSample is ignored) with a span
	// per statement, and a span that finds the export queue full waits for
	// room instead of being dropped, so export keeps pace with the API at
	// the API's cost. The queue itself stays bounded (spanQueue): the
	// report's collector starved the API of CPU, not of memory.
	UncappedTelemetry bool
	// NoIndexes drops the indexes on the columns the API filters, joins
	// and orders by (tasks by user_id with created_at, status, due_at or
	// priority; devices by user_id; task_details by task_id; migrations
	// 0002 and 0005): the task GET's LEFT JOIN of its details and a task
	// delete's cascade scan task_details, and listing a user's tasks and
	// finding their devices scan whole tables.
	NoIndexes bool
	// DefaultTx wraps every write statement in its own transaction, as
	// GORM does unless SkipDefaultTransaction is set (BEGIN and COMMIT
	// round trips around each INSERT, UPDATE, DELETE; reads are not
	// wrapped, as in GORM).
	DefaultTx bool
	// UserTouch reproduces the report's bug: every authenticated request
	// runs in a transaction that first updates the user's row, so
	// concurrent requests of one user (their devices) queue on its lock.
	UserTouch bool
	// GoroutinePerJob starts a goroutine per side job (notification)
	// instead of queueing it for the workers: nothing bounds how many run
	// at once, hold database connections, or open webhook connections.
	GoroutinePerJob bool
	// KeepFileLimit lifts report C's optimization 6: the process keeps a
	// soft open-file limit of LowFileLimit (the usual default, 1024)
	// instead of raising it (RaiseFileLimit), so that past about a
	// thousand sockets accept and dial fail with "too many open files".
	// Serve applies it (it is the process's, not a Service's).
	KeepFileLimit bool
}

// Config configures a Service. Only DatabaseURL is required; the zero
// value of every other field is the default documented on it.
type Config struct {
	// DatabaseURL is the Postgres connection string (required).
	DatabaseURL string

	// Pool limits (ignored with Deopt.NoPoolLimits).
	MaxConns        int32         // default 16
	MinConns        int32         // default 2
	MaxConnIdleTime time.Duration // default 1m
	MaxConnLifetime time.Duration // default 30m

	// WebhookURL receives push notifications (POST, JSON); "" turns push
	// notifications off. Redirects are not followed; logs show it without
	// its user info and query, which may hold a token.
	WebhookURL string
	// WebhookSecret, when set, signs every webhook request
	// (SignatureHeader, checked with VerifyWebhook); unset, requests are
	// unsigned and New warns.
	WebhookSecret string
	QueueSize     int           // notification jobs waiting at most (default 4096); more are dropped and counted
	Workers       int           // notification workers (default 8)
	NotifyTimeout time.Duration // per webhook attempt (default 2s)
	NotifyRetries int           // retries after a failed attempt (default 2; negative: none)
	NotifyBackoff time.Duration // wait before the first retry, doubled each time (default 100ms)
	// NotifyMaxBatchBytes bounds a webhook call's body (default 1 MiB): a
	// batch over it is split in calls under it; a single notification
	// over it goes alone. A call answered 413 is split in halves, down to
	// the one notification the webhook refuses, which alone fails.
	NotifyMaxBatchBytes int
	// NotifyOutbox makes notifications survive a crash: each is written
	// to the notify_outbox table in the transaction of the change that
	// causes it, and workers deliver the rows (outbox.go), deleting each
	// only once the webhook answered 2xx, so a notification is delivered
	// at least once, whatever process dies. Off (the default): the
	// report's bounded in-memory queue (optimization 7), which a crash
	// empties. It costs an INSERT in every task write's transaction (a
	// write that was one statement becomes a transaction of two) and the
	// workers' claims and deletes. It needs WebhookURL.
	NotifyOutbox bool
	// NotifyOutboxRetries is how many failed attempts after the first an
	// outbox row is rescheduled (backoff from NotifyBackoff, doubled each
	// time, at most a minute) before it is kept as failed: 12 by default,
	// about four minutes of webhook outage; negative: none.
	NotifyOutboxRetries int
	// NotifyOutboxPoll is how often idle outbox workers look for rows
	// that other instances wrote or a crashed process left (default 1s);
	// this process's own changes wake them at once.
	NotifyOutboxPoll time.Duration
	// MaxDevicesPerUser bounds the devices one user may register (default
	// 10; negative: no bound): one more is refused with 409 until they
	// delete one. A token registered again is the same device.
	MaxDevicesPerUser int

	// TokenSecret signs bearer tokens (HMAC-SHA256). Default: a random
	// secret, so tokens do not survive a restart or reach another instance.
	TokenSecret []byte
	TokenTTL    time.Duration // default 24h
	// TokenAudience binds tokens to a deployment: a token signed for one
	// audience is refused by a service with another, even under the same
	// secret (staging and production sharing one by mistake). Default:
	// the database's host, port and name (instances of one deployment
	// share a database), or "" without TokenSecret (each start's random
	// secret binds tokens to it already).
	TokenAudience string
	// BcryptCost is the password hash's cost (default bcrypt.DefaultCost, 10).
	BcryptCost int

	// Login attempts are limited by token buckets (ratelimit.go), per
	// account (email) and per client address (IPv6: its /64): Burst
	// attempts at once, refilled at Rate a minute; past a limit, login
	// answers 429 with Retry-After, before a password is checked.
	// Negative Rate: no limit.
	LoginAccountRate  float64 // attempts a minute per account (default 10)
	LoginAccountBurst int     // attempts at once per account (default 10)
	LoginIPRate       float64 // attempts a minute per client address (default 60)
	LoginIPBurst      int     // attempts at once per client address (default 100)

	// LoginLimits is where the login and sign-up buckets live:
	// LimitsProcess ("process", the default) keeps them in each process,
	// so a cluster of N instances allows N times each limit;
	// LimitsPostgres ("postgres") shares them through the database, one
	// statement per attempt, so the limits hold for the cluster.
	LoginLimits string
	// TrustedProxies are the proxies (CIDRs or addresses) whose
	// X-Forwarded-For is believed when they are the connection's peer:
	// the client is the rightmost address in it that is not a trusted
	// proxy (clientaddr.go). Default none: the client is the peer, and
	// behind a balancer every client shares the balancer's buckets.
	TrustedProxies []string

	// Sign-ups are limited the same way, before the password is hashed:
	// per client address and on the whole service (every address
	// together), so that neither one address nor many can take the
	// bcrypt time logins need, or create accounts without bound (each
	// allowed its WebSockets). A limited sign-up answers 429 with
	// Retry-After. Negative Rate: no limit.
	SignupIPRate  float64 // sign-ups a minute per client address (default 10)
	SignupIPBurst int     // sign-ups at once per client address (default 10)
	SignupRate    float64 // sign-ups a minute on the service (default 600)
	SignupBurst   int     // sign-ups at once on the service (default 100)

	// MaxWebSocketsPerUser bounds a user's open WebSockets on this
	// process (default 8; negative: no bound). One more is refused with
	// 429 and Retry-After until one of theirs closes; a socket whose
	// device vanished is found by its ping within a ping interval (30 s).
	MaxWebSocketsPerUser int
	// MaxWebSockets bounds the WebSockets of this process, every user's
	// together (default 10,000; negative: no bound). One more is refused
	// with 503 and Retry-After.
	MaxWebSockets int

	// Events is how task events reach WebSockets: EventsLocal (the
	// default, report C's: the process that made a change tells its own
	// sockets, and no other) or EventsPostgres (every change writes its
	// event to an event log in its own transaction, and every instance
	// delivers it from there; events.go). With more than one instance,
	// set EventsPostgres on every one of them.
	Events string
	// EventRetention is how long the event log keeps an event (default
	// 24h): a device may resume from any event younger than that.
	EventRetention time.Duration

	MaxBodyBytes   int64         // largest request body (default 64 KiB)
	RequestTimeout time.Duration // bound on a request's database work (default 5s)

	// OTLPEndpoint, when set, exports sampled traces over OTLP/HTTP
	// (host:port or a URL). Empty: OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT if set, else no export (trace ids
	// still appear in logs).
	OTLPEndpoint string
	// TraceSample is the share of requests traced (default 0.01; negative:
	// none). An incoming traceparent's decision is kept.
	TraceSample float64
	// AccessLog logs every request; by default only 5xx answers and
	// requests slower than a second are logged.
	AccessLog bool

	Deopt Deopt

	// listenerPing, when set, replaces listenerPing, and listenerTimeout
	// for the ping (events.go), so that tests find a silent connection
	// quickly.
	listenerPing time.Duration

	// Registry receives the service's metrics (default: a new one).
	Registry *prometheus.Registry
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.DatabaseURL == "" {
		return errors.New("tasks: no database: set DatabaseURL (--dsn postgres://user@host:port/db)")
	}
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("tasks: webhook URL %s must be an absolute http(s) URL", webhookLabel(c.WebhookURL))
		}
	}
	defaults.Positive(&c.MaxConns, DefaultMaxConns)
	defaults.Positive(&c.MinConns, DefaultMinConns)
	c.MinConns = min(c.MinConns, c.MaxConns)
	defaults.Positive(&c.MaxConnIdleTime, DefaultMaxConnIdleTime)
	defaults.Positive(&c.MaxConnLifetime, DefaultMaxConnLifetime)
	defaults.Positive(&c.NotifyTimeout, DefaultNotifyTimeout)
	defaults.Positive(&c.NotifyBackoff, DefaultNotifyBackoff)
	defaults.Positive(&c.TokenTTL, DefaultTokenTTL)
	defaults.Positive(&c.RequestTimeout, DefaultRequestTimeout)
	defaults.Positive(&c.QueueSize, DefaultQueueSize)
	defaults.Positive(&c.Workers, DefaultWorkers)
	switch {
	case c.NotifyRetries == 0:
		c.NotifyRetries = DefaultNotifyRetries
	case c.NotifyRetries < 0:
		c.NotifyRetries = 0
	}
	switch c.LoginLimits {
	case "":
		c.LoginLimits = LimitsProcess
	case LimitsProcess, LimitsPostgres:
	default:
		return fmt.Errorf("tasks: login limits %q: give %s (buckets in each instance) or %s (shared by every instance on the database)", c.LoginLimits, LimitsProcess, LimitsPostgres)
	}
	if c.NotifyOutbox && c.WebhookURL == "" {
		return errors.New("tasks: the notification outbox needs a webhook: give --webhook-url (or $TASKS_WEBHOOK_URL), or leave --notify-outbox off")
	}
	switch {
	case c.NotifyOutboxRetries == 0:
		c.NotifyOutboxRetries = DefaultNotifyOutboxRetries
	case c.NotifyOutboxRetries < 0:
		c.NotifyOutboxRetries = 0
	}
	defaults.Positive(&c.NotifyOutboxPoll, DefaultNotifyOutboxPoll)
	if c.BcryptCost == 0 {
		c.BcryptCost = bcrypt.DefaultCost
	}
	if c.BcryptCost < bcrypt.MinCost || c.BcryptCost > bcrypt.MaxCost {
		return fmt.Errorf("tasks: bcrypt cost %d is outside %d..%d", c.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	defaults.Positive(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.Events = cmp.Or(c.Events, EventsLocal)
	if c.Events != EventsLocal && c.Events != EventsPostgres {
		return fmt.Errorf("tasks: events %q: use %s (one instance) or %s (several instances, or devices that resume)", c.Events, EventsLocal, EventsPostgres)
	}
	defaults.Positive(&c.EventRetention, DefaultEventRetention)
	// Rates and bounds below: 0 takes the default, negative means none.
	c.LoginAccountRate = cmp.Or(c.LoginAccountRate, DefaultLoginAccountRate)
	c.LoginIPRate = cmp.Or(c.LoginIPRate, DefaultLoginIPRate)
	c.SignupIPRate = cmp.Or(c.SignupIPRate, DefaultSignupIPRate)
	c.SignupRate = cmp.Or(c.SignupRate, DefaultSignupRate)
	c.MaxWebSockets = cmp.Or(c.MaxWebSockets, DefaultMaxWebSockets)
	c.MaxWebSocketsPerUser = cmp.Or(c.MaxWebSocketsPerUser, DefaultMaxWebSocketsPerUser)
	c.MaxDevicesPerUser = cmp.Or(c.MaxDevicesPerUser, DefaultMaxDevicesPerUser)
	defaults.Positive(&c.LoginAccountBurst, DefaultLoginAccountBurst)
	defaults.Positive(&c.LoginIPBurst, DefaultLoginIPBurst)
	defaults.Positive(&c.SignupIPBurst, DefaultSignupIPBurst)
	defaults.Positive(&c.SignupBurst, DefaultSignupBurst)
	defaults.Positive(&c.NotifyMaxBatchBytes, DefaultNotifyMaxBatchBytes)
	switch {
	case c.TraceSample == 0:
		c.TraceSample = DefaultTraceSample
	case c.TraceSample < 0:
		c.TraceSample = 0
	case c.TraceSample > 1:
		return fmt.Errorf("tasks: trace sample %v must be a share between 0 and 1", c.TraceSample)
	}
	if len(c.TokenSecret) > 0 && len(c.TokenSecret) < 16 {
		return errors.New("tasks: the token secret must have at least 16 bytes")
	}
	if c.TokenAudience == "" && len(c.TokenSecret) > 0 {
		if pc, err := pgconn.ParseConfig(c.DatabaseURL); err == nil {
			c.TokenAudience = fmt.Sprintf("postgres://%s:%d/%s", pc.Host, pc.Port, pc.Database)
		}
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}
