package refdata

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/server"
)

// Config configures a reference-data service (catalog, pricing). Only
// DB.DSN is required; DB's other fields have the defaults documented on
// DB (slot hlab_<service>).
type Config struct {
	// Source is FromReplica (default), FromPostgres or FromMongo.
	Source Source
	// DB is Postgres; with FromMongo it is optional (no DSN: no pool).
	DB DB
	// Mongo is where FromMongo's replica reads.
	Mongo Mongo
	// Registry receives the service's metrics (default: a new one).
	Registry prometheus.Registerer
	// Logger receives the replica's events (default slog.Default()).
	Logger *slog.Logger
	// MaxStaleness is how long the replica may go without confirming it
	// has everything the database committed before requests answer 503
	// and /readyz fails (default DefaultMaxStaleness).
	MaxStaleness time.Duration
	// PositionWait bounds a request's wait for the position of its
	// MinPositionHeader (default DefaultPositionWait).
	PositionWait time.Duration
}

// DefaultMaxStaleness is Config.MaxStaleness's default: five of the
// replica's one-second confirmations while idle, so a slow round trip
// or a long transaction on the wire does not take an instance out.
const DefaultMaxStaleness = 5 * time.Second

// MinMaxStaleness is the least Config.MaxStaleness taken: twice the
// interval at which an idle replica confirms it is current (1 s for
// Postgres; MongoDB's await, 1 s, plus its poll).
const MinMaxStaleness = 2 * time.Second

// RegisterFlags adds --source, described by sourceHelp, and the database
// flags of service to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet, service, sourceHelp string) {
	fs.Var(&c.Source, "source", sourceHelp)
	c.DB.RegisterFlags(fs, service)
	c.Mongo.RegisterFlags(fs)
	fs.DurationVar(&c.MaxStaleness, "max-staleness", DefaultMaxStaleness, "how old the replica's data may be before requests answer 503 (with Retry-After and its age) and /readyz fails: the time since it last confirmed it had everything the database committed. It confirms at least once a second while idle, so give at least 2s; a few seconds ride out a slow round trip. Every answer carries the age in X-Replica-Age")
}

// SetDefaults fills c's zero fields with the defaults for service, or
// returns an error naming what is wrong.
func (c *Config) SetDefaults(service string) error {
	c.Source = cmp.Or(c.Source, FromReplica)
	switch c.Source {
	case FromReplica, FromPostgres:
	case FromMongo:
		if c.Mongo.URI == "" {
			return ErrNoMongoURI
		}
		c.Mongo.DB = cmp.Or(c.Mongo.DB, DefaultMongoDB)
	default:
		return fmt.Errorf("source %q: want replica, postgres or mongo", c.Source)
	}
	if c.DB.PersistDir != "" && c.Source != FromReplica {
		return fmt.Errorf("--persist-dir makes the Postgres replica durable: it needs --source replica, not %s (a MongoDB replica does not restart from disk yet)", c.Source)
	}
	c.Registry = cmp.Or[prometheus.Registerer](c.Registry, prometheus.NewRegistry())
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MaxStaleness = cmp.Or(c.MaxStaleness, DefaultMaxStaleness)
	if c.MaxStaleness < MinMaxStaleness {
		return fmt.Errorf("--max-staleness %s: give at least %s (default %s): an idle replica confirms it is current about once a second", c.MaxStaleness, MinMaxStaleness, DefaultMaxStaleness)
	}
	c.PositionWait = cmp.Or(c.PositionWait, DefaultPositionWait)
	c.DB.SetDefaults(service)
	return nil
}

// Service is what Serve runs: a catalog or pricing service.
type Service interface {
	Run(ctx context.Context)
	Ready() error
	Fresh() error
	Close()
	Handler() http.Handler
}

// Serve builds a service with newService, on a metrics registry of its
// own, and serves it under the shared server configured by srv (its name,
// address or listener, admin address and timeouts; Serve sets its
// registry, logger and readiness) until ctx ends, keeping its replica
// fresh meanwhile.
func Serve(ctx context.Context, srv server.Config, cfg Config, newService func(context.Context, Config) (Service, error)) error {
	cfg.Logger = cmp.Or(cfg.Logger, srv.Logger)
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	s, err := newService(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	defer func() { stop(); <-done }()
	srv.Registry, srv.Logger, srv.Ready, srv.Fresh = reg, cfg.Logger, s.Ready, s.Fresh
	return server.Run(ctx, srv, s.Handler())
}
