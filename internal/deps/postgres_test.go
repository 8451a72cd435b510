package deps

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPostgres starts a real cluster, writes and reads, stops the server
// (a connection fails) and starts it again on the same data.
func TestPostgres(t *testing.T) {
	if _, _, err := FindPostgres(); errors.Is(err, ErrPostgresNotInstalled) {
		t.Skip("PostgreSQL is not installed (make deps installs it)")
	}
	sb := testSandbox(t)
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
	// Only with the password: not over TCP, not over the socket.
	for _, dsn := range []string{"postgres://postgres@" + pg.Addr + "/app?sslmode=disable", "host=" + pg.Settings["unix_socket_directories"] + " port=" + pg.Settings["port"] + " user=postgres dbname=app"} {
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Close(ctx)
			t.Errorf("%s connected without the password", dsn)
		}
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

// TestPostgresSweepsDeadOwnersDirs: a cluster directory whose owner died
// without Stop (SIGKILL) is removed by the next start; a live owner's
// stays.
func TestPostgresSweepsDeadOwnersDirs(t *testing.T) {
	if _, _, err := FindPostgres(); errors.Is(err, ErrPostgresNotInstalled) {
		t.Skip("PostgreSQL is not installed (make deps installs it)")
	}
	// A dead owner: a child that has exited and been reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(os.TempDir(), postgresTempPrefix+"test-dead")
	live := filepath.Join(os.TempDir(), postgresTempPrefix+"test-live")
	for dir, pid := range map[string]int{dead: cmd.Process.Pid, live: os.Getpid()} {
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(live)
	defer os.RemoveAll(dead)
	sb := testSandbox(t)
	pg, err := StartPostgres(context.Background(), sb, PostgresConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead owner's %s is still there (%v)", dead, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live owner's %s was removed: %v", live, err)
	}
}
