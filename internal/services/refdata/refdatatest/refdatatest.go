// Package refdatatest gives the tests of report B's services, and of the
// replica package they build on, a real Postgres (one per test binary,
// started by internal/deps) and seeded databases on it.
//
//	func TestMain(m *testing.M) { os.Exit(refdatatest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		dsn, pool := refdatatest.DB(t, refdatatest.Small)
//		...
//	}
package refdatatest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/refdata"
)

// Small is a seed size that loads in a blink.
var Small = refdata.Size{Products: 2000, Customers: 3000}

var (
	pg  *deps.Postgres
	seq atomic.Int64
)

// Main starts Postgres, calls each of setup with it, runs the tests and
// stops it. Without PostgreSQL installed the tests fail with how to
// install it.
func Main(m *testing.M, setup ...func(*deps.Postgres) error) int {
	if _, _, err := deps.FindPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "these tests need PostgreSQL:", err)
		return 1
	}
	sb, err := sandbox.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sb.Close()
	if pg, err = deps.StartPostgres(context.Background(), sb, deps.PostgresConfig{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pg.Stop()
	for _, f := range setup {
		if err := f(pg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// Postgres is the running server.
func Postgres() *deps.Postgres { return pg }

// DB creates a database with the schema and the seed of size, and returns
// its DSN and a pool on it (closed when the test ends).
func DB(t testing.TB, size refdata.Size) (string, *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), seq.Add(1))
	if err := pg.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	dsn := pg.DSN(name)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := refdata.Init(ctx, pool, size); err != nil {
		t.Fatal(err)
	}
	return dsn, pool
}
