package deps

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/rootdir"
	"github.com/highload-lab/hlab/internal/testkit"
)

// The postgres user is not root's equal: a local attacker with its uid
// (a compromised extension, a COPY ... TO PROGRAM) must not make root
// write, truncate, chown or read a file of its choosing by planting
// symbolic links where root works. These tests plant them for real, as
// the postgres user (runuser), while this process is root.

// asPostgres runs a shell command as the postgres user and reports
// whether it succeeded.
func asPostgres(t *testing.T, script string) bool {
	t.Helper()
	out, err := exec.Command("runuser", "-u", "postgres", "--", "sh", "-c", script).CombinedOutput()
	t.Logf("as postgres: %s: err %v %s", script, err, strings.TrimSpace(string(out)))
	return err == nil
}

// linkTestSetup skips t unless it can run Postgres as root with a
// postgres user, and returns victim files: root-owned files an attacker
// would aim at, each holding "untouched\n".
func linkTestSetup(t *testing.T, names ...string) map[string]string {
	t.Helper()
	if _, _, err := FindPostgres(); errors.Is(err, ErrPostgresNotInstalled) {
		testkit.SkipMissing(t, "PostgreSQL", err)
	}
	if os.Geteuid() != 0 {
		testkit.SkipMissing(t, "a test of root following links", errors.New("it needs root"))
	}
	if _, err := user.Lookup("postgres"); err != nil {
		testkit.SkipMissing(t, "the postgres user", err)
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		testkit.SkipMissing(t, "runuser", err)
	}
	dir := t.TempDir()
	victims := map[string]string{}
	for _, n := range names {
		victims[n] = filepath.Join(dir, "victim-"+n)
		if err := os.WriteFile(victims[n], []byte("untouched\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return victims
}

// checkVictims fails t for every victim that was changed: written,
// truncated, chowned or made a cluster's.
func checkVictims(t *testing.T, victims map[string]string) {
	t.Helper()
	for name, v := range victims {
		b, err := os.ReadFile(v)
		if err != nil || string(b) != "untouched\n" {
			t.Errorf("the %s victim %s was written through a link: %q, %v", name, v, lastBytes(b, 200), err)
		}
		fi, err := os.Stat(v)
		if err == nil && rootdir.Owner(fi) != 0 {
			t.Errorf("the %s victim %s was chowned to uid %d through a link", name, v, rootdir.Owner(fi))
		}
	}
}

// TestPostgresLinksPlantedAfterUp: after a first up and down of a kept
// cluster, the postgres user replaces every file root writes there with a
// link to a root-owned file. The second up must not follow any of them.
func TestPostgresLinksPlantedAfterUp(t *testing.T) {
	victims := linkTestSetup(t, "log", "password", "pwfile")
	parent, err := os.MkdirTemp("", "hlab-pglinks-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(parent)
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "cluster")
	sb := testSandbox(t)
	ctx := context.Background()
	pg, err := StartPostgres(ctx, sb, PostgresConfig{Dir: dir, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	planted := 0
	for _, f := range []struct{ file, victim string }{
		{"postgres.log", victims["log"]},
		{"password", victims["password"]},
		{"pwfile", victims["pwfile"]},
	} {
		if asPostgres(t, "ln -sfn "+f.victim+" "+filepath.Join(dir, f.file)) {
			planted++
		}
	}
	t.Logf("%d of 3 links planted", planted)
	pg, err = StartPostgres(ctx, sb, PostgresConfig{Dir: dir, Keep: true})
	if err == nil {
		pg.Stop()
	}
	checkVictims(t, victims)
	if planted == 0 && err != nil {
		t.Errorf("no link could be planted, yet the second up failed: %v", err)
	}
}

// TestPostgresDirPlantedBeforeUp: the postgres user makes the cluster's
// directory before root's first up (its path is predictable), with links
// where root would write. Root must refuse a directory another user owns,
// and write nothing through it.
func TestPostgresDirPlantedBeforeUp(t *testing.T) {
	victims := linkTestSetup(t, "log", "password", "pwfile")
	dir, err := os.MkdirTemp("", "hlab-pgplant-")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(dir) // the postgres user makes it
	defer os.RemoveAll(dir)
	script := "mkdir -m 755 " + dir +
		" && ln -s " + victims["log"] + " " + filepath.Join(dir, "postgres.log") +
		" && ln -s " + victims["password"] + " " + filepath.Join(dir, "password") +
		" && ln -s " + victims["pwfile"] + " " + filepath.Join(dir, "pwfile")
	if !asPostgres(t, script) {
		t.Fatal("the postgres user could not plant its directory")
	}
	pg, err := StartPostgres(context.Background(), testSandbox(t), PostgresConfig{Dir: dir, Keep: true})
	if err == nil {
		pg.Stop()
		t.Errorf("StartPostgres accepted %s, a directory the postgres user owns", dir)
	} else if !strings.Contains(err.Error(), "owned by") {
		t.Errorf("StartPostgres: %v; want it to say who owns the directory", err)
	}
	checkVictims(t, victims)
}
