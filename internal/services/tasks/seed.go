package tasks

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/bcrypt"
)

// SeedSpec is test data for experiments and tests: Users accounts, each
// with TasksPerUser tasks (each with its details) and DevicesPerUser
// devices.
type SeedSpec struct {
	Users          int
	TasksPerUser   int
	DevicesPerUser int
	// Password of every seeded account (SeedPassword if empty), hashed once
	// at BcryptCost (bcrypt.DefaultCost if 0).
	Password   string
	BcryptCost int
}

// SeedPassword is the seeded accounts' default password.
const SeedPassword = "seed-password"

// SeedEmail is the email of seeded account i (1-based).
func SeedEmail(i int) string { return fmt.Sprintf("user%d@seed.hlab.test", i) }

// Seed fills a migrated database with spec's data in a few statements, in
// one transaction. On a large seed, revert the "indexes" migration first
// and migrate after: building the indexes once is faster than updating
// them row by row.
// Tasks are inserted round-robin over users, as a live system interleaves
// them, so one user's tasks are spread over the table. At the end the
// tables are vacuumed and analyzed, as a live database's autovacuum would
// have done: otherwise the first reads of each page write hint bits, and
// autovacuum sets about the new rows in the middle of what comes next.
func Seed(ctx context.Context, conn *pgx.Conn, spec SeedSpec) error {
	pw := spec.Password
	if pw == "" {
		pw = SeedPassword
	}
	cost := spec.BcryptCost
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return err
	}
	steps := []struct {
		what string
		sql  string
		args []any
	}{
		{"users", `INSERT INTO users (email, name, password_hash)
			SELECT 'user' || g || '@seed.hlab.test', 'Seed user ' || g, $2 FROM generate_series(1, $1) g`,
			[]any{spec.Users, string(hash)}},
		{"devices", `INSERT INTO devices (user_id, platform, push_token)
			SELECT u.id, (ARRAY['ios', 'android', 'web'])[1 + d % 3], 'seed-push-' || u.id || '-' || d
			FROM users u, generate_series(1, $1) d WHERE u.email LIKE '%@seed.hlab.test' ORDER BY d, u.id`,
			[]any{spec.DevicesPerUser}},
		// Each task with its details row, in the tasks' order, as the API
		// makes them.
		{"tasks", `WITH t AS (
				INSERT INTO tasks (user_id, title, description, status, priority, due_at, created_at, updated_at)
				SELECT u.id, 'Seeded task ' || t, 'A task the seed made, number ' || t || ' of its user.',
					(ARRAY['todo', 'doing', 'done'])[1 + t % 3], t % 4,
					CASE WHEN t % 5 = 0 THEN NULL ELSE now() + t * interval '1 hour' END,
					now() - ($1 - t) * interval '1 minute', now() - ($1 - t) * interval '1 minute'
				FROM generate_series(1, $1) t, users u WHERE u.email LIKE '%@seed.hlab.test' ORDER BY t, u.id
				RETURNING id, created_at)
			INSERT INTO task_details (task_id, notes, created_at)
			SELECT id, 'Notes the seed made for task ' || id || '.', created_at FROM t ORDER BY id`,
			[]any{spec.TasksPerUser}},
	}
	// One transaction: one commit, and room to sort the rows in memory.
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("tasks: seed: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '256MB'`); err != nil {
		return fmt.Errorf("tasks: seed: %w", err)
	}
	for _, s := range steps {
		if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
			return fmt.Errorf("tasks: seed %s: %w", s.what, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("tasks: seed: %w", err)
	}
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE) users, devices, tasks, task_details`); err != nil {
		return fmt.Errorf("tasks: seed: vacuum: %w", err)
	}
	return nil
}
