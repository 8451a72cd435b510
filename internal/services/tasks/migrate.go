package tasks

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Migrations are versioned SQL files, NNNN_name.up.sql with an optional
// NNNN_name.down.sql, applied in order, each in its own transaction, and
// recorded in schema_migrations. Migrate applies every version not yet
// recorded, so a migration reverted by Revert comes back on the next start.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one versioned schema change.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string // "" when it cannot be reverted
}

// IndexMigrations names the migrations that Deopt.NoIndexes leaves out
// and reverts: report C's optimization 3, the indexes on the columns the
// API joins, filters and orders by (0002 for the lists and devices, 0005
// for the GET's join). A large seed migrates without them and builds
// them once after (faster than updating them row by row).
func IndexMigrations() []string { return []string{"indexes", "join_index"} }

// migrationLock is the advisory lock that serializes instances migrating
// one database at the same time.
const migrationLock = 0x7461736b73 // "tasks"

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	byVersion := map[int]*Migration{}
	err := fs.WalkDir(migrationFiles, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		base := strings.TrimPrefix(path, "migrations/")
		stem, dir, ok := strings.Cut(strings.TrimSuffix(base, ".sql"), ".")
		vs, name, ok2 := strings.Cut(stem, "_")
		v, err := strconv.Atoi(vs)
		if !ok || !ok2 || err != nil || (dir != "up" && dir != "down") {
			return fmt.Errorf("tasks: migration file %s is not NNNN_name.up.sql or .down.sql", base)
		}
		b, err := migrationFiles.ReadFile(path)
		if err != nil {
			return err
		}
		m := byVersion[v]
		if m == nil {
			m = &Migration{Version: v, Name: name}
			byVersion[v] = m
		}
		if dir == "up" {
			m.Up = string(b)
		} else {
			m.Down = string(b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" {
			return nil, fmt.Errorf("tasks: migration %04d_%s has no .up.sql", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Migrate brings the schema of the database at conn up to date: it applies
// every embedded migration not recorded in schema_migrations. It holds an
// advisory lock meanwhile, so instances starting together take turns.
func Migrate(ctx context.Context, conn *pgx.Conn) (applied []string, err error) {
	return MigrateExcept(ctx, conn)
}

// MigrateExcept is Migrate leaving out the migrations called skip (which
// later migrations must not need).
func MigrateExcept(ctx context.Context, conn *pgx.Conn, skip ...string) (applied []string, err error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	unlock, err := lockMigrations(ctx, conn)
	if err != nil {
		return nil, err
	}
	defer unlock()
	done, err := appliedVersions(ctx, conn)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if done[m.Version] || slices.Contains(skip, m.Name) {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.Up); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("tasks: migration %04d_%s: %w", m.Version, m.Name, err)
		}
		applied = append(applied, fmt.Sprintf("%04d_%s", m.Version, m.Name))
	}
	return applied, nil
}

// Revert undoes the applied migration called name with its .down.sql and
// forgets it; it does nothing when that migration is not applied.
func Revert(ctx context.Context, conn *pgx.Conn, name string) (reverted bool, err error) {
	ms, err := Migrations()
	if err != nil {
		return false, err
	}
	var m *Migration
	for i := range ms {
		if ms[i].Name == name {
			m = &ms[i]
		}
	}
	if m == nil || m.Down == "" {
		return false, fmt.Errorf("tasks: no revertible migration called %q", name)
	}
	unlock, err := lockMigrations(ctx, conn)
	if err != nil {
		return false, err
	}
	defer unlock()
	done, err := appliedVersions(ctx, conn)
	if err != nil || !done[m.Version] {
		return false, err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.Down); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version = $1`, m.Version)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("tasks: revert %04d_%s: %w", m.Version, m.Name, err)
	}
	return true, nil
}

func lockMigrations(ctx context.Context, conn *pgx.Conn) (unlock func(), err error) {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		return nil, fmt.Errorf("tasks: migration lock: %w", err)
	}
	return func() { conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock)) }, nil
}

func appliedVersions(ctx context.Context, conn *pgx.Conn) (map[int]bool, error) {
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version int PRIMARY KEY,
		name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("tasks: schema_migrations: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("tasks: schema_migrations: %w", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("tasks: schema_migrations: %w", err)
	}
	done := map[int]bool{}
	for _, v := range vs {
		done[int(v)] = true
	}
	return done, nil
}
