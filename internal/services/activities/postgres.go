package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Table is the table (Postgres) and the table in Keyspace (Cassandra)
// that holds the activities.
const Table = "activities"

// pgSchema is our table: report A3's columns with proper types, plus the
// index the history read needs (the report's table, ReportPostgresTable,
// has none: reading a user's history scans it). Our Cassandra table is
// partitioned for the same read, so both pay for it on insert.
const pgSchema = `
CREATE TABLE IF NOT EXISTS activities (
	id      uuid PRIMARY KEY,
	user_id uuid NOT NULL,
	ts      timestamptz NOT NULL,
	data    jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS activities_user_ts ON activities (user_id, ts DESC);
`

// schemaLock serializes schema creation between instances starting at once
// (CREATE TABLE IF NOT EXISTS races on the catalog otherwise).
const schemaLock = 7_000_001

// pgTable is what a Postgres store runs against its table, ours or the
// report's (Config.Schema).
type pgTable struct {
	create  string               // at start; creates what is missing
	insert  string               // $1-$4: values
	columns []string             // COPY's (--batch), in values' order
	values  func(Activity) []any // one activity's, for insert and COPY
	// recent reads a user's history: $1 user(id), $2 the limit; it
	// answers id (uuid), timestamp (timestamptz), data.
	recent string
	user   func(uuid.UUID) any
}

func pgTableOf(cfg Config) pgTable {
	if cfg.Schema == SchemaReport {
		return pgTable{
			create: ReportPostgresTable, insert: ReportPostgresInsert,
			columns: []string{"id", "user_id", "timestamp", "data"},
			// As the report's app passed them: ids as text, the time as
			// Go's clock gives it, the JSON as a string.
			values: func(a Activity) []any { return []any{a.ID.String(), a.UserID.String(), a.Time, string(a.Data)} },
			// No index serves it: the read scans the table, which is
			// what made the report's team move the data.
			recent: `SELECT id::uuid, timestamp AT TIME ZONE 'UTC', data FROM activities WHERE user_id = $1 ORDER BY timestamp DESC, id LIMIT $2`,
			user:   func(u uuid.UUID) any { return u.String() },
		}
	}
	return pgTable{
		create: pgSchema, insert: "INSERT INTO activities (id, user_id, ts, data) VALUES ($1, $2, $3, $4)",
		columns: []string{"id", "user_id", "ts", "data"},
		values:  func(a Activity) []any { return []any{[16]byte(a.ID), [16]byte(a.UserID), a.Time, []byte(a.Data)} },
		recent:  "SELECT id, ts, data FROM activities WHERE user_id = $1 ORDER BY ts DESC, id LIMIT $2",
		user:    func(u uuid.UUID) any { return [16]byte(u) },
	}
}

// pgStore keeps activities in Postgres through a bounded pgx pool.
type pgStore struct {
	pool *pgxpool.Pool
	t    pgTable
}

var _ Store = (*pgStore)(nil)

func openPostgres(ctx context.Context, cfg Config) (*pgStore, error) {
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("%w: --dsn: %v", ErrConfig, err)
	}
	pc.MaxConns = int32(cfg.PoolMax)
	pc.MinConns = 0
	// A connection broken by a restart of the server is found and
	// replaced within a second, not at the next use of each.
	pc.HealthCheckPeriod = time.Second
	if pc.ConnConfig.ConnectTimeout == 0 || pc.ConnConfig.ConnectTimeout > cfg.Timeout {
		pc.ConnConfig.ConnectTimeout = cfg.Timeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	s := &pgStore{pool: pool, t: pgTableOf(cfg)}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *pgStore) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLock); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.t.create)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: postgres: creating the schema: %w", ErrUnavailable, err)
	}
	return nil
}

func (s *pgStore) Kind() string { return "postgres" }

func (s *pgStore) Insert(ctx context.Context, a Activity) error {
	// One statement, its own transaction: the answer comes once the
	// commit is as durable as the server's synchronous_commit says.
	_, err := s.pool.Exec(ctx, s.t.insert, s.t.values(a)...)
	if err != nil {
		return fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	return nil
}

// InsertBatch copies rows in with COPY, one statement and so one
// transaction and one commit: all rows are stored or none.
func (s *pgStore) InsertBatch(ctx context.Context, rows []Activity, errs []error) {
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{Table}, s.t.columns,
		pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) { return s.t.values(rows[i]), nil }))
	if err != nil {
		err = fmt.Errorf("%w: postgres: batch of %d: %w", ErrUnavailable, len(rows), err)
	}
	for i := range errs {
		errs[i] = err
	}
}

func (s *pgStore) Recent(ctx context.Context, user uuid.UUID, limit int) ([]Activity, error) {
	rows, err := s.pool.Query(ctx, s.t.recent, s.t.user(user), limit)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	out := make([]Activity, 0, limit)
	for rows.Next() {
		var (
			id   [16]byte
			ts   time.Time
			data []byte
		)
		if err := rows.Scan(&id, &ts, &data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
		}
		out = append(out, Activity{ID: id, UserID: user, Time: ts.UTC(), Data: json.RawMessage(data)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	return out, nil
}

func (s *pgStore) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	return nil
}

func (s *pgStore) Close() { s.pool.Close() }
