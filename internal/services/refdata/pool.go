package refdata

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/replica"
)

// DB is how a service reaches Postgres and names its replication slot.
// Every field but DSN has a default, documented on it.
type DB struct {
	// DSN is a libpq connection string or URL (required).
	DSN string
	// Timeout bounds the database work of one request, all its queries
	// together (default 2s); the server's statement_timeout is set to it
	// too, so a query abandoned by the client does not run on.
	Timeout time.Duration
	// MaxConns caps the pool (default 16): under overload requests queue
	// for a connection (within Timeout) instead of opening more.
	MaxConns int32
	// MinConns are kept open (default 2).
	MinConns int32
	// MaxConnLifetime recycles connections (default 30m).
	MaxConnLifetime time.Duration
	// MaxConnIdleTime closes idle connections above MinConns (default 5m).
	MaxConnIdleTime time.Duration
	// ConnectTimeout bounds dialing and authenticating (default 5s).
	ConnectTimeout time.Duration
	// Slot and Publication name the replica's replication slot and
	// publication (default "hlab_" + the service's name). Each running
	// replica needs its own slot: a second instance on the same one stays
	// not ready with replica.ErrSlotInUse. The slot is dropped when the
	// service stops (unless PersistDir is set); one killed outright leaves it, holding WAL on the
	// server until a replica of that slot name starts again (see the
	// replica package's doc: set max_slot_wal_keep_size).
	Slot, Publication string
	// PersistDir, when set, makes the replica durable: its slot is kept
	// when the service stops, and its tables are written to
	// PersistDir/<Slot>.replica every PersistEvery (default 1m) and at
	// stop, so the next start loads the file and streams what changed
	// since instead of copying every table (replica.PostgresPersist). A
	// stopped durable instance keeps WAL on the server: retire one by
	// dropping its slot.
	PersistDir   string
	PersistEvery time.Duration
	// SnapshotLimit is how many instances that share the Publication, on
	// this database, load the replica's snapshot at once (default 2;
	// negative: no limit): the others wait their turn, not ready (see
	// replica.PostgresSnapshotLimit).
	SnapshotLimit int
	// Init creates the schema and loads the seed if the database is empty.
	Init bool
	// Seed is the size Init loads.
	Seed Size
}

// Defaults of DB's zero fields.
const (
	DefaultTimeout         = 2 * time.Second
	DefaultMaxConns        = 16
	DefaultMinConns        = 2
	DefaultMaxConnLifetime = 30 * time.Minute
	DefaultMaxConnIdleTime = 5 * time.Minute
	DefaultConnectTimeout  = 5 * time.Second
	DefaultPersistEvery    = time.Minute
	DefaultSnapshotLimit   = replica.DefaultSnapshotLimit
)

// SetDefaults fills the zero fields; service names the default slot and
// publication.
func (d *DB) SetDefaults(service string) {
	defaults.Positive(&d.Timeout, DefaultTimeout)
	defaults.Positive(&d.MaxConns, DefaultMaxConns)
	defaults.Positive(&d.MinConns, min(DefaultMinConns, d.MaxConns))
	defaults.Positive(&d.MaxConnLifetime, DefaultMaxConnLifetime)
	defaults.Positive(&d.MaxConnIdleTime, DefaultMaxConnIdleTime)
	defaults.Positive(&d.ConnectTimeout, DefaultConnectTimeout)
	defaults.Positive(&d.PersistEvery, DefaultPersistEvery)
	d.Slot = cmp.Or(d.Slot, "hlab_"+service)
	d.Publication = cmp.Or(d.Publication, "hlab_"+service)
	d.SnapshotLimit = cmp.Or(d.SnapshotLimit, DefaultSnapshotLimit) // negative: no limit
}

// RegisterFlags adds the database flags to fs; service names the default
// slot and publication.
func (d *DB) RegisterFlags(fs *flag.FlagSet, service string) {
	cliflag.SecretVar(fs, &d.DSN, "dsn", "DATABASE_URL", "Postgres connection string, e.g. postgres://catalog:PASSWORD@127.0.0.1:5432/hlab (required), of a role with REPLICATION that owns the tables, not a superuser")
	fs.DurationVar(&d.Timeout, "db-timeout", DefaultTimeout, "bound on one request's database work (also the server's statement_timeout)")
	fs.Var(cliflag.AtLeast(&d.MaxConns, 1), "max-conns", "largest number of Postgres connections (default 16)")
	fs.Var(cliflag.AtLeast(&d.MinConns, 1), "min-conns", "Postgres connections kept open (default 2)")
	fs.DurationVar(&d.MaxConnLifetime, "max-conn-lifetime", DefaultMaxConnLifetime, "recycle Postgres connections after this long")
	fs.DurationVar(&d.MaxConnIdleTime, "max-conn-idle", DefaultMaxConnIdleTime, "close Postgres connections idle this long (above --min-conns)")
	fs.DurationVar(&d.ConnectTimeout, "connect-timeout", DefaultConnectTimeout, "bound on connecting to Postgres")
	fs.StringVar(&d.Slot, "slot", "hlab_"+service, "replication slot of the replica: one per running instance (a second one on it is not ready); dropped when the service stops (kept with --persist-dir)")
	fs.StringVar(&d.Publication, "publication", "hlab_"+service, "publication the replica streams (created if missing)")
	fs.StringVar(&d.PersistDir, "persist-dir", "", "make the replica durable: keep its slot when the service stops and write its tables to DIR/<slot>.replica, so a restart loads them and streams what changed instead of copying every table; a stopped instance then keeps WAL on the server (set max_slot_wal_keep_size; retire an instance by dropping its slot)")
	fs.DurationVar(&d.PersistEvery, "persist-every", DefaultPersistEvery, "with --persist-dir: how often the replica's file is written (the server keeps the WAL since the last one)")
	fs.IntVar(&d.SnapshotLimit, "snapshot-limit", DefaultSnapshotLimit, "instances sharing --publication that load the replica's snapshot at once, at start and on a resync; the others wait their turn, not ready (Postgres advisory locks; size it to what the database can spare; -1: no limit)")
	fs.BoolVar(&d.Init, "init", false, "create the tables and load the seed data if the database is empty")
	fs.IntVar(&d.Seed.Products, "seed-products", DefaultProducts, "with --init: products to generate")
	fs.IntVar(&d.Seed.Customers, "seed-customers", DefaultCustomers, "with --init: customers to generate")
}

// OpenPool returns a pool with d's limits (call SetDefaults first) whose
// every query increments queries: the figure behind "8x fewer queries".
// It does not wait for a connection; the first query or Ping does.
func OpenPool(ctx context.Context, d DB, queries prometheus.Counter) (*pgxpool.Pool, error) {
	if d.DSN == "" {
		return nil, ErrNoDSN
	}
	cfg, err := pgxpool.ParseConfig(d.DSN)
	if err != nil {
		return nil, fmt.Errorf("refdata: bad Postgres DSN: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = d.MaxConns, d.MinConns
	cfg.MaxConnLifetime, cfg.MaxConnIdleTime = d.MaxConnLifetime, d.MaxConnIdleTime
	cfg.MaxConnLifetimeJitter = d.MaxConnLifetime / 10
	cfg.HealthCheckPeriod = 30 * time.Second
	cfg.ConnConfig.ConnectTimeout = d.ConnectTimeout
	if d.Timeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(d.Timeout.Milliseconds(), 10)
	}
	if queries != nil {
		cfg.ConnConfig.Tracer = queryCounter{queries}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("refdata: Postgres pool: %w", err)
	}
	return pool, nil
}

// queryCounter counts every query a pool sends (Query, QueryRow, Exec).
type queryCounter struct{ c prometheus.Counter }

func (q queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.c.Inc()
	return ctx
}

func (queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// NewQueryCounter registers the counter of database queries a service
// sends, db_queries_total, with reg.
func NewQueryCounter(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "db_queries_total", Help: "Queries sent to Postgres (each Query, QueryRow or Exec).",
	})
	reg.MustRegister(c)
	return c
}
