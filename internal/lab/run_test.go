package lab_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestStartServicePortsRetriesOnlyATakenPort checks that a service that
// could not bind its port is started again on new ports (three sets in
// all), and one that failed for another reason is not.
func TestStartServicePortsRetriesOnlyATakenPort(t *testing.T) {
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, tc := range []struct {
		name, says string
		starts     int
		taken      bool
	}{
		{"port taken", "listen tcp 127.0.0.1:1: bind: address already in use", 3, true},
		{"another failure", "no such flag", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// A stand-in for "hlab serve" that counts its starts, says why
			// it fails and exits.
			self := filepath.Join(dir, "serve.sh")
			script := "#!/bin/sh\necho x >> " + filepath.Join(dir, "starts") + "\necho '" + tc.says + "'\nexit 1\n"
			if err := os.WriteFile(self, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			var startErr error
			exp := experiment{run: func(ctx context.Context, r *lab.Run) error {
				_, startErr = r.StartServicePorts(ctx, "work", 0, 0, []string{"--grpc-addr"})
				return startErr
			}}
			lab.RunAll(context.Background(), []lab.Experiment{exp},
				lab.Options{Mode: lab.Quick, Short: true, WorkDir: dir, Self: self}, sb, nil)
			b, _ := os.ReadFile(filepath.Join(dir, "starts"))
			if starts := strings.Count(string(b), "x"); starts != tc.starts {
				t.Errorf("started %d times, want %d", starts, tc.starts)
			}
			if startErr == nil || errors.Is(startErr, deps.ErrPortTaken) != tc.taken {
				t.Errorf("err = %v: want one that wraps deps.ErrPortTaken: %v", startErr, tc.taken)
			}
		})
	}
}

// TestCleanupRunsLastFirstAfterAFailedRun: what an experiment registers
// with Run.Cleanup runs once its Run returned, also with an error, last
// registered first, and not before Run returned.
func TestCleanupRunsLastFirstAfterAFailedRun(t *testing.T) {
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var order []int
	exp := experiment{run: func(ctx context.Context, r *lab.Run) error {
		for i := range 3 {
			r.Cleanup(func() { order = append(order, i) })
		}
		if len(order) != 0 {
			t.Errorf("cleanups ran before Run returned: %v", order)
		}
		return errors.New("a phase failed")
	}}
	results := runAll(t, sb, exp)
	if results[0].Error == "" {
		t.Errorf("the experiment's error was lost")
	}
	if !slices.Equal(order, []int{2, 1, 0}) {
		t.Errorf("cleanups ran in order %v, want [2 1 0]", order)
	}
}

// TestServiceSecretsOutOfArgv starts a Postgres and the task API as the
// crud experiment does, then does what any local user can: reads the
// service's command line (ps, /proc/PID/cmdline) as nobody. It must not
// hold a password; the environment, which carries the DSN, must be
// unreadable to nobody; and the DSN's role must not be a superuser,
// whose COPY ... TO PROGRAM is a shell on the machine.
func TestServiceSecretsOutOfArgv(t *testing.T) {
	if _, _, err := deps.FindPostgres(); err != nil {
		if os.Getenv("HLAB_REQUIRE_DEPS") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("reads another user's view of /proc: needs root to switch to nobody")
	}
	bin := testkit.HlabBinary(t)
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	exp := experiment{run: func(ctx context.Context, r *lab.Run) error {
		pg, err := r.Postgres(ctx, deps.PostgresConfig{})
		if err != nil {
			return err
		}
		defer pg.Stop()
		if err := pg.CreateDatabase(ctx, "tasks"); err != nil {
			return err
		}
		dsn := pg.ServiceDSN("tasks")
		u, _ := url.Parse(dsn)
		rolePW, _ := u.User.Password()
		svc, err := r.StartCommand(ctx, "tasks", 0, 0, tasks.Options{Config: tasks.Config{DatabaseURL: dsn}}.Command())
		if err != nil {
			return err
		}
		defer svc.Stop()
		pid := strconv.Itoa(svc.Proc.PID())
		cmdline, err := exec.Command("runuser", "-u", "nobody", "--", "cat", "/proc/"+pid+"/cmdline").Output()
		if err != nil {
			t.Fatalf("nobody cannot read the command line (%v): the test would prove nothing", err)
		}
		for what, pw := range map[string]string{"superuser": pg.Password, "service role": rolePW} {
			if pw == "" || strings.Contains(string(cmdline), pw) {
				t.Errorf("the %s password %q is in the service's command line, which every user reads: %q", what, pw, cmdline)
			}
		}
		if out, err := exec.Command("runuser", "-u", "nobody", "--", "cat", "/proc/"+pid+"/environ").CombinedOutput(); err == nil {
			t.Errorf("nobody read the service's environment: %q", out)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var super bool
		if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil || super {
			t.Errorf("the service's role is a superuser: %v, %v", super, err)
		}
		_, err = conn.Exec(ctx, "COPY (SELECT 1) TO PROGRAM 'true'")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("COPY ... TO PROGRAM as the service's role: %v; want insufficient_privilege (42501)", err)
		}
		return nil
	}}
	dir := t.TempDir()
	results, err := lab.RunAll(context.Background(), []lab.Experiment{exp},
		lab.Options{Mode: lab.Quick, Short: true, WorkDir: dir, Self: bin}, sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Error != "" {
		log, _ := os.ReadFile(filepath.Join(dir, "gate", "tasks-1.log"))
		t.Fatalf("%s\nthe service's log:\n%s", results[0].Error, log)
	}
}
