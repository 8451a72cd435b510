package activities

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Postgres connection pools (Config.PGPool).
const (
	// PoolBounded is a pgx pool of at most Config.PoolMax connections,
	// kept open between requests: the default.
	PoolBounded = "bounded"
	// PoolSQLDefaults is Go's database/sql as it runs when nobody sets its
	// limits: no bound on open connections, and at most 2 idle ones kept
	// (sql.DB's default MaxIdleConns). With more concurrent requests than
	// 2, most connections are closed as soon as their request ends and a
	// new one (a new Postgres backend process) is opened for the next.
	// Each statement is parsed and described, then executed: two round
	// trips and no statement kept, as lib/pq (the report's driver) sends
	// a statement with arguments. It is here to measure report A3's app,
	// whose pool had no limits set.
	PoolSQLDefaults = "sql-defaults"
)

// sqlStore keeps activities in Postgres through database/sql with its
// default, unset limits (PoolSQLDefaults).
type sqlStore struct {
	db *sql.DB
	t  pgTable
}

var _ Store = (*sqlStore)(nil)

func openSQLDefaults(ctx context.Context, cfg Config) (*sqlStore, error) {
	cc, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("%w: --dsn: %v", ErrConfig, err)
	}
	if cc.ConnectTimeout == 0 || cc.ConnectTimeout > cfg.Timeout {
		cc.ConnectTimeout = cfg.Timeout
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	// Deliberately no SetMaxOpenConns, SetMaxIdleConns or
	// SetConnMaxLifetime: see PoolSQLDefaults.
	db := stdlib.OpenDB(*cc)
	s := &sqlStore{db: db, t: pgTableOf(cfg)}
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tx, err := db.BeginTx(mctx, nil)
	if err == nil {
		if _, err = tx.ExecContext(mctx, "SELECT pg_advisory_xact_lock($1)", schemaLock); err == nil {
			_, err = tx.ExecContext(mctx, s.t.create)
		}
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: postgres: creating the schema: %w", ErrUnavailable, err)
	}
	return s, nil
}

func (s *sqlStore) Kind() string { return "postgres (database/sql defaults)" }

func (s *sqlStore) Insert(ctx context.Context, a Activity) error {
	_, err := s.db.ExecContext(ctx, s.t.insert, s.t.values(a)...)
	if err != nil {
		return fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	return nil
}

// InsertBatch inserts rows in one transaction: one commit for all.
func (s *sqlStore) InsertBatch(ctx context.Context, rows []Activity, errs []error) {
	err := func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, a := range rows {
			if _, err := tx.ExecContext(ctx, s.t.insert, s.t.values(a)...); err != nil {
				return err
			}
		}
		return tx.Commit()
	}()
	if err != nil {
		err = fmt.Errorf("%w: postgres: batch of %d: %w", ErrUnavailable, len(rows), err)
	}
	for i := range errs {
		errs[i] = err
	}
}

func (s *sqlStore) Recent(ctx context.Context, user uuid.UUID, limit int) ([]Activity, error) {
	rows, err := s.db.QueryContext(ctx, s.t.recent, s.t.user(user), limit)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	out := make([]Activity, 0, limit)
	for rows.Next() {
		var (
			id   uuid.UUID
			ts   time.Time
			data []byte
		)
		if err := rows.Scan(&id, &ts, &data); err != nil {
			return nil, fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
		}
		out = append(out, Activity{ID: id, UserID: user, Time: ts.UTC(), Data: json.RawMessage(data)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	return out, nil
}

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	return nil
}

func (s *sqlStore) Close() { s.db.Close() }
