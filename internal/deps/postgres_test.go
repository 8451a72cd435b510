package deps

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// TestPostgres starts a real cluster, writes and reads, stops the server
// (a connection fails) and starts it again on the same data.
func TestPostgres(t *testing.T) {
	if _, _, err := FindPostgres(); errors.Is(err, ErrPostgresNotInstalled) {
		t.Skip("PostgreSQL is not installed (make deps installs it)")
	}
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ctx := context.Background()
	pg, err := StartPostgres(ctx, sb, PostgresConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	if pg.Settings["wal_level"] != "logical" || pg.Settings["fsync"] != "off" {
		t.Errorf("settings %v: want logical WAL and the test-only fsync=off recorded", pg.Settings)
	}
	if err := pg.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pg.DSN("app"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	var walLevel string
	query := func() error {
		c, err := pgx.Connect(ctx, pg.DSN("app"))
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return c.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel)
	}
	if err := query(); err != nil || walLevel != "logical" {
		t.Fatalf("wal_level %q, %v", walLevel, err)
	}

	if err := pg.StopServer(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if c, err := pgx.Connect(cctx, pg.DSN("app")); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	if err := pg.StartServer(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, pg.DSN("app"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after restart: %d rows, %v; want the 2 written before", n, err)
	}
}
