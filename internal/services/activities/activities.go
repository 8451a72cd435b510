// Package activities is report A3's service: it records user activities
// (id, user, timestamp, JSON data) in Postgres or in Cassandra, one insert
// per request or through a write-behind batcher, and reads a user's
// recent history.
//
//	GET  /handle                      report A3's request: a random activity, inserted
//	POST /activities                  {"user_id": "<uuid>", "data": <JSON>, "timestamp": "<RFC 3339>"?}
//	GET  /activities?user_id=&limit=  a user's activities, newest first (limit 1-100, default 20)
//
// A write is answered (200 for /handle, 201 for POST) only after the
// database acknowledged it, with whatever durability the database is
// configured for; with --batch, after the batch holding it was written.
// Invalid requests get 400 (413 for a body over --max-body-bytes) with
// the reason; a database that fails or does not answer within --timeout
// gets 503, and the service recovers by itself once it is back.
//
// Postgres is reached through pgx with a bounded pool (--pool-max), in a
// table the service creates with an index on (user_id, ts) for the
// history read; --pg-pool sql-defaults uses database/sql with no limits
// set instead, as report A3's app did (see PoolSQLDefaults). Cassandra is
// reached through the Apache Cassandra Go driver (gocql v2), in a
// keyspace of replication factor 1 and a table partitioned by user and
// clustered newest first, at --consistency (default QUORUM, the
// report's), logging in with --cassandra-user when the node
// authenticates. --schema report writes report A3's own tables instead,
// as its apps did (SchemaReport), to rerun the report's setup.
package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/server"
)

// Stores.
const (
	Postgres  = "postgres"
	Cassandra = "cassandra"
)

// Defaults of Config.
const (
	DefaultPoolMax        = 16
	DefaultCassandraConns = 2
	DefaultTimeout        = 2 * time.Second
	DefaultConsistency    = "QUORUM"
)

// Config configures the service; only the address of the store is
// required. Zero values take the defaults documented on each field.
type Config struct {
	// Store is Postgres (the default) or Cassandra.
	Store string
	// DSN is the Postgres connection string (Store Postgres).
	DSN string
	// PoolMax bounds the Postgres connections (DefaultPoolMax).
	PoolMax int
	// PGPool is PoolBounded (the default: pgx, at most PoolMax) or
	// PoolSQLDefaults (database/sql with no limits set, report A3's app).
	PGPool string
	// Cassandra lists the nodes, host:port, comma-separated (Store
	// Cassandra).
	Cassandra string
	// Keyspace is created when missing (DefaultKeyspace), with
	// ReplicationFactor (1).
	Keyspace          string
	ReplicationFactor int
	// Consistency of reads and writes (DefaultConsistency, QUORUM).
	Consistency string
	// CassandraConns is the driver's connections per node
	// (DefaultCassandraConns).
	CassandraConns int
	// CassandraUser and CassandraPassword log in to a Cassandra that
	// authenticates (PasswordAuthenticator); no user: no login.
	CassandraUser, CassandraPassword string
	// Schema is the table: SchemaOurs (the default) or SchemaReport.
	Schema string
	// Timeout bounds each request's database work, the wait for a batch
	// included (DefaultTimeout); past it the request gets 503.
	Timeout time.Duration
	// Batch writes through a Batcher configured by Batcher.
	Batch   bool
	Batcher BatcherConfig
	// MaxBodyBytes bounds a POST body (DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Registry receives the service's metrics (default: a new one).
	Registry prometheus.Registerer
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// RegisterFlags adds the service's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Store, "store", Postgres, "where activities go: postgres or cassandra")
	cliflag.SecretVar(fs, &c.DSN, "dsn", "DATABASE_URL", "Postgres connection string (--store postgres), of a role that owns the service's database, not a superuser")
	fs.IntVar(&c.PoolMax, "pool-max", DefaultPoolMax, "most Postgres connections in the pool")
	fs.StringVar(&c.PGPool, "pg-pool", PoolBounded, "Postgres connections: bounded (a pgx pool of at most --pool-max, kept open) or sql-defaults (database/sql with no limits set: unbounded, 2 idle kept, the rest reopened per request; report A3's app)")
	fs.StringVar(&c.Cassandra, "cassandra", "127.0.0.1:9042", "Cassandra nodes, host:port, comma-separated (--store cassandra)")
	fs.StringVar(&c.Keyspace, "keyspace", DefaultKeyspace, "Cassandra keyspace, created when missing")
	fs.IntVar(&c.ReplicationFactor, "replication-factor", 1, "replication factor of a keyspace the service creates")
	fs.StringVar(&c.Consistency, "consistency", DefaultConsistency, "Cassandra consistency of reads and writes (ONE, QUORUM, ALL, LOCAL_QUORUM, ...)")
	fs.IntVar(&c.CassandraConns, "cassandra-conns", DefaultCassandraConns, "Cassandra driver connections per node")
	fs.StringVar(&c.CassandraUser, "cassandra-user", "", "Cassandra user to log in as (PasswordAuthenticator); empty: no login")
	cliflag.SecretVar(fs, &c.CassandraPassword, "cassandra-password", "CASSANDRA_PASSWORD", "password of --cassandra-user")
	fs.StringVar(&c.Schema, "schema", SchemaOurs, "the table: ours (built for the history read: Postgres indexed on (user_id, ts), Cassandra partitioned by user) or report (report A3's own tables and inserts, to rerun its setup; on Cassandra it has no history read)")
	fs.DurationVar(&c.Timeout, "timeout", DefaultTimeout, "bound on a request's database work (the wait for its batch included); past it, 503")
	fs.BoolVar(&c.Batch, "batch", false, "write through a batcher: many requests' rows in one write (Postgres: COPY in one transaction; Cassandra: an unlogged batch per partition), each request answered once its batch is written")
	fs.IntVar(&c.Batcher.MaxRows, "batch-rows", DefaultBatchRows, "--batch: most rows in a batch")
	fs.DurationVar(&c.Batcher.MaxDelay, "batch-delay", DefaultBatchDelay, "--batch: longest a row waits for its batch to be sealed (a batch also goes as soon as a flusher is free)")
	fs.IntVar(&c.Batcher.Flushers, "batch-flushers", DefaultBatchFlushers, "--batch: batches written at once")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", DefaultMaxBodyBytes, "largest POST /activities body")
}

func (c *Config) setDefaults() error {
	c.Store = cmp.Or(c.Store, Postgres)
	defaults.Positive(&c.PoolMax, DefaultPoolMax)
	c.PGPool = cmp.Or(c.PGPool, PoolBounded)
	if c.PGPool != PoolBounded && c.PGPool != PoolSQLDefaults {
		return fmt.Errorf("%w: --pg-pool %q: want %s or %s", ErrConfig, c.PGPool, PoolBounded, PoolSQLDefaults)
	}
	c.Schema = cmp.Or(c.Schema, SchemaOurs)
	if c.Schema != SchemaOurs && c.Schema != SchemaReport {
		return fmt.Errorf("%w: --schema %q: want %s or %s", ErrConfig, c.Schema, SchemaOurs, SchemaReport)
	}
	c.Keyspace = cmp.Or(c.Keyspace, DefaultKeyspace)
	defaults.Positive(&c.ReplicationFactor, 1)
	c.Consistency = cmp.Or(c.Consistency, DefaultConsistency)
	defaults.Positive(&c.CassandraConns, DefaultCassandraConns)
	defaults.Positive(&c.Timeout, DefaultTimeout)
	defaults.Positive(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	defaults.Positive(&c.Batcher.Timeout, c.Timeout)
	c.Registry = cmp.Or[prometheus.Registerer](c.Registry, prometheus.NewRegistry())
	c.Logger = cmp.Or(c.Logger, slog.Default())
	switch c.Store {
	case Postgres:
		if c.DSN == "" {
			return fmt.Errorf("%w: --store postgres needs --dsn", ErrConfig)
		}
	case Cassandra:
	default:
		return fmt.Errorf("%w: --store %q: want postgres or cassandra", ErrConfig, c.Store)
	}
	return nil
}

// Service is a running activity service.
type Service struct {
	cfg   Config
	store Store
	batch *Batcher // nil without Config.Batch
	// random is GET /handle's activity: ours, or that of the report's app
	// for the store (SchemaReport).
	random func() Activity

	writes     *prometheus.CounterVec
	batchRows  prometheus.Histogram
	batchTimes prometheus.Histogram
}

// New connects to the store, creates its schema when missing and, with
// Config.Batch, starts the batcher.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	var (
		st  Store
		err error
	)
	switch cfg.Store {
	case Postgres:
		if cfg.PGPool == PoolSQLDefaults {
			st, err = openSQLDefaults(ctx, cfg)
		} else {
			st, err = openPostgres(ctx, cfg)
		}
	case Cassandra:
		st, err = openCassandra(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, store: st, random: RandomActivity}
	if cfg.Schema == SchemaReport {
		s.random = reportPostgresActivity
		if cfg.Store == Cassandra {
			s.random = reportCassandraActivity
		}
	}
	s.writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "activities_writes_total", Help: "Activities written, by result: ok (acknowledged to the client) or error.",
	}, []string{"result"})
	s.batchRows = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "activities_batch_rows", Help: "Rows per batch written (--batch).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	})
	s.batchTimes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "activities_batch_seconds", Help: "Time to write one batch (--batch).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	for _, c := range []prometheus.Collector{s.writes, s.batchRows, s.batchTimes} {
		if err := cfg.Registry.Register(c); err != nil {
			st.Close()
			return nil, fmt.Errorf("%w: metrics: %v", ErrConfig, err)
		}
	}
	if cfg.Batch {
		s.batch = NewBatcher(cfg.Batcher, st.InsertBatch)
		s.batch.Observe = func(rows int, took time.Duration, _ error) {
			s.batchRows.Observe(float64(rows))
			s.batchTimes.Observe(took.Seconds())
		}
	}
	cfg.Logger.Info("activities: store ready", "store", st.Kind(), "batch", cfg.Batch, "timeout", cfg.Timeout)
	return s, nil
}

// Close stops the batcher (writing what it holds) and closes the store.
func (s *Service) Close() {
	if s.batch != nil {
		s.batch.Close()
	}
	s.store.Close()
}

// Ready is nil when the database answers.
func (s *Service) Ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), min(s.cfg.Timeout, time.Second))
	defer cancel()
	return s.store.Ping(ctx)
}

// Handler serves the service's routes.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /handle", s.handle)
	mux.HandleFunc("POST /activities", s.post)
	mux.HandleFunc("GET /activities", s.recent)
	return mux
}

// insert writes a, directly or through the batcher, within the timeout.
func (s *Service) insert(ctx context.Context, a Activity) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var err error
	if s.batch != nil {
		err = s.batch.Add(ctx, a)
	} else {
		err = s.store.Insert(ctx, a)
	}
	if err != nil {
		s.writes.WithLabelValues("error").Inc()
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrClosed) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	s.writes.WithLabelValues("ok").Inc()
	return nil
}

func fail(w http.ResponseWriter, err error) {
	code := statusOf(err)
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, err.Error(), code)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// handle is report A3's request: a random activity, inserted. On the
// report's table it answers as the report's app did.
func (s *Service) handle(w http.ResponseWriter, r *http.Request) {
	a := s.random()
	if err := s.insert(r.Context(), a); err != nil {
		fail(w, err)
		return
	}
	if s.cfg.Schema == SchemaReport {
		w.Header().Add("Content-Type", "application/json")
		w.Write([]byte("saved! " + a.ID.String()))
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Service) post(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			fail(w, fmt.Errorf("%w: Content-Type %.60q: send application/json", ErrMediaType, ct))
			return
		}
	}
	a, err := parseNew(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), time.Now())
	if err != nil {
		fail(w, err)
		return
	}
	if err := s.insert(r.Context(), a); err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Location", "/activities?user_id="+a.UserID.String())
	writeJSON(w, http.StatusCreated, a)
}

// History is the answer of GET /activities.
type History struct {
	UserID     uuid.UUID  `json:"user_id"`
	Activities []Activity `json:"activities"`
}

func (s *Service) recent(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := q.Get("user_id")
	user, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		fail(w, fmt.Errorf("%w: user_id must be a UUID (GET /activities?user_id=<uuid>&limit=N), not %.40q", ErrBadRequest, v))
		return
	}
	limit := DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			fail(w, fmt.Errorf("%w: limit must be 1-%d, not %.20q", ErrBadRequest, MaxLimit, v))
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	out, err := s.store.Recent(ctx, user, limit)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, History{UserID: user, Activities: out})
}

// Serve runs the service under the shared server configured by srv (its
// address or listener, admin address and timeouts; Serve sets its name,
// registry, logger and readiness) until ctx ends.
func Serve(ctx context.Context, srv server.Config, cfg Config) error {
	cfg.Logger = cmp.Or(cfg.Logger, srv.Logger)
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	srv.Name, srv.Registry, srv.Logger, srv.Ready = "activities", reg, cfg.Logger, s.Ready
	return server.Run(ctx, srv, s.Handler())
}

// Command returns the command that makes "hlab serve activities" run c:
// the flags c changes from the defaults, and its DSN for the environment.
func (c Config) Command() cliflag.Command { return cliflag.CommandOf(c) }
