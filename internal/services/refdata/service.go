package refdata

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"

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
}

// RegisterFlags adds --source, described by sourceHelp, and the database
// flags of service to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet, service, sourceHelp string) {
	fs.Var(&c.Source, "source", sourceHelp)
	c.DB.RegisterFlags(fs, service)
	c.Mongo.RegisterFlags(fs)
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
	c.DB.SetDefaults(service)
	return nil
}

// Service is what Serve runs: a catalog or pricing service.
type Service interface {
	Run(ctx context.Context)
	Ready() error
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
	srv.Registry, srv.Logger, srv.Ready = reg, cfg.Logger, s.Ready
	return server.Run(ctx, srv, s.Handler())
}
