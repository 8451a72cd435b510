package crudexp

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/services/tasks"
)

// startPostgres starts Postgres (or connects to the one --postgres names):
// durable, unconstrained, with the report's max_connections.
func (b *bench) startPostgres(ctx context.Context) error {
	b.run.Progress.Step("postgres: start", 3*time.Second)
	pg, err := b.run.Postgres(ctx, deps.PostgresConfig{Durable: true, Settings: map[string]string{"max_connections": maxConnections}})
	if err != nil {
		return err
	}
	b.pg = pg
	return nil
}

// seed makes two copies of the data: the services with indexes share
// one, those without the other, so that every configuration runs at once
// and the claim's rows can run in rounds. It keeps a connection to each
// for the list query's probe.
func (b *bench) seed(ctx context.Context) error {
	b.run.Progress.Step(fmt.Sprintf("postgres: seed 2 x %d users, %d tasks", b.users, b.users*seedTasks), 2*seedTime(b.users))
	start := time.Now()
	for _, withIdx := range []bool{true, false} {
		name := map[bool]string{true: "tasks", false: "tasks_noidx"}[withIdx]
		if err := b.pg.CreateDatabase(ctx, name); err != nil {
			return err
		}
		b.dsns[withIdx] = b.pg.ServiceDSN(name)
		conn, err := pgx.Connect(ctx, b.dsns[withIdx])
		if err != nil {
			return fmt.Errorf("crud: %w", err)
		}
		b.dbs[withIdx] = conn
		if err := seedOne(ctx, conn, b.users, withIdx); err != nil {
			return err
		}
	}
	b.seeded = time.Since(start)
	return b.checkMaxConnections(ctx)
}

// checkMaxConnections records the max_connections the server runs with:
// the report's on a Postgres the lab started, an external server's own
// (noted) with --postgres.
func (b *bench) checkMaxConnections(ctx context.Context) error {
	var n string
	if err := b.dbs[true].QueryRow(ctx, `SHOW max_connections`).Scan(&n); err != nil {
		return fmt.Errorf("crud: max_connections: %w", err)
	}
	if b.run.Opts.External.Postgres != "" {
		b.run.Note("max_connections is the external server's own, %s (the report's was %s)", n, maxConnections)
		return nil
	}
	b.run.UsedInFirstClaim(itemMaxConns, n)
	return nil
}

// seedOne migrates and fills one database: without the indexes, which are
// then built once (faster than updating them row by row), or left out.
func seedOne(ctx context.Context, conn *pgx.Conn, users int, withIndexes bool) error {
	if _, err := tasks.MigrateExcept(ctx, conn, tasks.IndexMigrations()...); err != nil {
		return err
	}
	if err := tasks.Seed(ctx, conn, tasks.SeedSpec{Users: users, TasksPerUser: seedTasks, DevicesPerUser: seedDevices, BcryptCost: bcryptCost}); err != nil {
		return err
	}
	if withIndexes {
		if _, err := tasks.Migrate(ctx, conn); err != nil {
			return err
		}
	}
	return nil
}

// probeListQuery times the list query straight on each database, for a
// seeded account no VU uses, once every row has run.
func (b *bench) probeListQuery(ctx context.Context) error {
	probeUser := int64(b.users / 2)
	for withIdx, conn := range b.dbs {
		q, err := timeListQuery(ctx, conn, probeUser)
		if err != nil {
			return err
		}
		b.listQuery[withIdx] = q
	}
	return nil
}

// timeListQuery times the list endpoint's query for one user straight on
// the database, without the service: the median of queryProbes runs.
func timeListQuery(ctx context.Context, conn *pgx.Conn, uid int64) (float64, error) {
	const q = `SELECT id, title, description, status, priority, due_at, created_at, updated_at
		FROM tasks WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0`
	var times []float64
	for range queryProbes {
		start := time.Now()
		rows, err := conn.Query(ctx, q, uid)
		if err != nil {
			return 0, fmt.Errorf("crud: list query: %w", err)
		}
		for rows.Next() {
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("crud: list query: %w", err)
		}
		times = append(times, float64(time.Since(start).Microseconds())/1000)
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
}
