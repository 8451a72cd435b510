package refdata

import (
	"cmp"
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/replica"
)

// Replica keeps a Set of tables fresh from Postgres (replica.PostgresSource,
// NewReplica) or MongoDB (replica.MongoSource, NewMongoReplica) and exports the library's metrics on the service's registry:
// replica_rows, replica_ready, replica_applied_changes_total,
// replica_staleness_seconds (its age: see Fresh), replica_table_bytes and
// replica_table_bytes_per_row (estimated memory) and replica_lag_seconds
// (commit in Postgres to visible here, per change) by table;
// replica_decode_errors_total, replica_resyncs_total (by reason),
// replica_applied_lsn, replica_snapshot_wait_seconds_total and
// replica_snapshot_loading of the source. replica_ready and
// replica_applied_lsn tell when it has caught up after a fault (see the
// replica package's doc). Its replication slot lives while Run runs.
type Replica struct {
	src    source
	tables []table
	loaded atomic.Bool
}

// source is what Replica needs of a replica.PostgresSource or
// replica.MongoSource.
type source interface {
	Run(ctx context.Context) error
	DecodeErrors() int64
	Resyncs() int64
}

// NewReplica binds set to a Postgres source on db (DSN, Slot, Publication)
// and registers its metrics with reg. maxStaleness bounds the age of
// the tables' data before Fresh fails (replica.PostgresMaxStaleness; 0:
// no bound).
func NewReplica(db DB, set Set, reg prometheus.Registerer, logger *slog.Logger, maxStaleness time.Duration) (*Replica, error) {
	if db.DSN == "" {
		return nil, ErrNoDSN
	}
	logger = cmp.Or(logger, slog.Default())
	return newReplica(set, reg, "postgres", func(t table) replica.Binding { return t.binding },
		func(bindings []replica.Binding) (source, error) {
			opts := []replica.PostgresOption{replica.PostgresSlot(db.Slot), replica.PostgresPublication(db.Publication),
				replica.PostgresLogger(logger), replica.PostgresMaxStaleness(maxStaleness)}
			if db.SnapshotLimit != 0 { // else the library's default
				opts = append(opts, replica.PostgresSnapshotLimit(db.SnapshotLimit))
			}
			if db.PersistDir != "" {
				opts = append(opts, replica.PostgresPersist(filepath.Join(db.PersistDir, db.Slot+".replica"), cmp.Or(db.PersistEvery, DefaultPersistEvery)))
			}
			return replica.NewPostgresSource(db.DSN, bindings, opts...)
		})
}

// newReplica binds set's tables (each through bind) to the source open
// returns, and registers the tables' and the source's metrics with reg,
// the source labelled kind.
func newReplica(set Set, reg prometheus.Registerer, kind string, bind func(table) replica.Binding,
	open func([]replica.Binding) (source, error)) (*Replica, error) {
	r := &Replica{tables: set.tables()}
	var (
		bindings []replica.Binding
		obs      []replica.Observable
	)
	for _, t := range r.tables {
		bindings = append(bindings, bind(t))
		obs = append(obs, t.obs)
	}
	src, err := open(bindings)
	if err != nil {
		return nil, err
	}
	r.src = src
	if err := replica.RegisterMetrics(reg, obs...); err != nil {
		return nil, err
	}
	if err := replica.RegisterSource(reg, kind, src); err != nil {
		return nil, err
	}
	return r, nil
}

// Run loads the tables and keeps them fresh until ctx ends.
func (r *Replica) Run(ctx context.Context) {
	go func() {
		for _, t := range r.tables {
			if t.wait(ctx) != nil {
				return
			}
		}
		r.loaded.Store(true)
	}()
	r.src.Run(ctx)
}

// Loaded reports whether the first snapshot is in memory. After it, the
// tables serve their last data even while the stream reconnects. Once
// Ready is nil, Loaded is true, even before Run's watcher has noticed the
// load (a service that answered ready must not then answer "loading").
func (r *Replica) Loaded() bool {
	if r.loaded.Load() {
		return true
	}
	if r.Ready() == nil {
		r.loaded.Store(true)
		return true
	}
	return false
}

// Ready is nil while every table is current; otherwise the source's error
// (why the stream is down), or ErrLoading before the first load.
func (r *Replica) Ready() error {
	for _, t := range r.tables {
		if st := t.obs.Stats(); !st.Ready {
			if st.Err != nil {
				return st.Err
			}
			return ErrLoading
		}
	}
	return nil
}

// DecodeErrors counts rows that failed to decode.
func (r *Replica) DecodeErrors() int64 { return r.src.DecodeErrors() }
