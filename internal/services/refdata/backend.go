package refdata

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Backend is what a reference-data service (catalog, pricing) reads from:
// Postgres through a pool and, unless the service reads Postgres
// directly, a Replica of its tables kept fresh from it, or from MongoDB
// (FromMongo; then Pool is nil when Config.DB has no DSN). Services embed it
// for Run, Ready and Close.
type Backend struct {
	Config Config // with its defaults
	Pool   *pgxpool.Pool
	Rep    *Replica // nil: the service reads Postgres
	errDB  error
}

// OpenBackend gives cfg its defaults for service (an invalid cfg wraps
// errs.Config), opens the pool on cfg.DB (counting queries on
// cfg.Registry), creates and seeds the schema with DB.Init, and, with
// FromReplica, binds set to a Replica. A failed readiness ping wraps
// errs.Database.
func OpenBackend(ctx context.Context, service string, cfg Config, set Set, errs Errors) (*Backend, error) {
	if err := cfg.SetDefaults(service); err != nil {
		return nil, fmt.Errorf("%w: %w", errs.Config, err)
	}
	db := cfg.DB
	queries := NewQueryCounter(cfg.Registry)
	if cfg.Source == FromMongo && db.DSN == "" {
		// Everything comes from MongoDB: no Postgres to open.
		rep, err := NewMongoReplica(cfg.Mongo, set, cfg.Registry, cfg.Logger, cfg.MaxStaleness)
		if err != nil {
			return nil, err
		}
		return &Backend{Config: cfg, Rep: rep, errDB: errs.Database}, nil
	}
	pool, err := OpenPool(ctx, db, queries)
	if err != nil {
		return nil, err
	}
	b := &Backend{Config: cfg, Pool: pool, errDB: errs.Database}
	if db.Init {
		ictx, cancel := context.WithTimeout(ctx, time.Minute)
		err := Init(ictx, pool, db.Seed)
		cancel()
		if err != nil {
			pool.Close()
			return nil, err
		}
	}
	if cfg.Source == FromPostgres {
		return b, nil
	}
	if cfg.Source == FromMongo {
		b.Rep, err = NewMongoReplica(cfg.Mongo, set, cfg.Registry, cfg.Logger, cfg.MaxStaleness)
	} else {
		b.Rep, err = NewReplica(db, set, cfg.Registry, cfg.Logger, cfg.MaxStaleness)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return b, nil
}

// Run keeps the replica fresh until ctx ends (without one it only waits
// for ctx).
func (b *Backend) Run(ctx context.Context) {
	if b.Rep == nil {
		<-ctx.Done()
		return
	}
	b.Rep.Run(ctx)
}

// Ready is nil when the service can answer: the replica is current, or
// without one, the database answers a ping.
func (b *Backend) Ready() error {
	if b.Rep != nil {
		return b.Rep.Ready()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %w", b.errDB, err)
	}
	return nil
}

// Close closes the pool, if there is one.
func (b *Backend) Close() {
	if b.Pool != nil {
		b.Pool.Close()
	}
}
