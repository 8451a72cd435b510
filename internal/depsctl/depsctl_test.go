package depsctl

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/deploy/grafana"
	"github.com/highload-lab/hlab/internal/rootdir"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, kind, version string
		ok                  bool
	}{
		{"postgres", "postgres", "", true},
		{"kafka", "kfake", "", true},
		{"kafka-real", "kafka-real", "", true},
		{"kafka@4.3.1", "kafka-real", "4.3.1", true},
		{"kafka-secure", "kafka-secure", "", true},
		{"kafka-cluster", "kafka-cluster", "", true},
		{"kafka@0.1", "", "", false},
		{"kafka@", "", "", false},
		{"cassandra", "cassandra", "", true},
		{"redis", "redis", "", true},
		{"mongo", "mongo", "", true},
		{"nginx", "nginx", "", true},
		{"prometheus", "prometheus", "", true},
		{"mongodb", "", "", false},
		{"", "", "", false},
	} {
		d, err := Parse(tc.name)
		if !tc.ok {
			if !errors.Is(err, ErrUnknownName) || !strings.Contains(err.Error(), strings.Join(Names(), ", ")) {
				t.Errorf("Parse(%q): %v; want ErrUnknownName listing the names", tc.name, err)
			}
			continue
		}
		if err != nil || d.kind != tc.kind || d.kafkaVersion != tc.version || d.Name != tc.name {
			t.Errorf("Parse(%q) = %+v, %v; want kind %s, version %q", tc.name, d, err, tc.kind, tc.version)
		}
	}
}

// TestStaleState: a state file whose supervisor is gone (killed with
// SIGKILL, its pid now another process's) means nothing runs, and is
// removed, so that up starts the dependency again.
func TestStaleState(t *testing.T) {
	dir := t.TempDir()
	other := exec.Command("sleep", "30") // alive, but no supervisor
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{dead.Process.Pid, other.Process.Pid, os.Getpid()} {
		if err := writeState(dir, State{Name: "redis", PID: pid, Conn: "redis://127.0.0.1:1", Started: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if s, ok, err := readState(dir); ok || err != nil {
			t.Errorf("pid %d, not a supervisor: readState = %+v, %v, %v; want nothing running", pid, s, ok, err)
		}
		if _, err := os.Stat(filepath.Join(dir, stateFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pid %d: the stale state file stays: %v", pid, err)
		}
		if states, err := List(dir); err != nil || len(states) != 0 {
			t.Errorf("List: %v, %v; want none", states, err)
		}
	}
}

// TestDownNotRunning: down of a dependency that never ran says so
// without an error and makes no directory.
func TestDownNotRunning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "redis")
	was, err := Down("redis", Options{StateDir: dir}, false)
	if was || err != nil {
		t.Errorf("Down = %v, %v; want false, nil", was, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Down made %s", dir)
	}
}

func TestReachable(t *testing.T) {
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip(err)
	}
	root, err := os.MkdirTemp("", "hlab-reachable-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	open := filepath.Join(root, "open", "dir")
	if err := os.MkdirAll(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if !reachable(open, u) {
		t.Errorf("%s (0755 all the way) is not reachable for nobody", open)
	}
	if err := os.Chmod(filepath.Join(root, "open"), 0o700); err != nil {
		t.Fatal(err)
	}
	if reachable(open, u) {
		t.Errorf("%s behind a 0700 directory is reachable for nobody", open)
	}
}

// TestPostgresDirOutOfItsUsersReach: the cluster of a state directory the
// postgres user cannot reach lives where that user cannot plant a link
// (it owns the cluster's data directory only, made later), and a cluster
// an older hlab left under a directory that user owns is refused, with
// what to do.
func TestPostgresDirOutOfItsUsersReach(t *testing.T) {
	pg, err := user.Lookup("postgres")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and the postgres user")
	}
	root, err := os.MkdirTemp("", "hlab-clusters-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(old string) { clusterRoot = old }(clusterRoot)
	clusterRoot = filepath.Join(root, "postgres")

	state := filepath.Join(t.TempDir(), "postgres") // behind a 0700 directory
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	target, err := postgresDir(state)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(target) != clusterRoot {
		t.Errorf("cluster at %s; want it under %s", target, clusterRoot)
	}
	if _, err := rootdir.Check(clusterRoot); err != nil {
		t.Errorf("%s: %v", clusterRoot, err)
	}
	out, err := exec.Command("runuser", "-u", "postgres", "--", "mkdir", target).CombinedOutput()
	if err == nil {
		t.Errorf("the postgres user made %s itself, ahead of root", target)
	}
	t.Logf("as postgres: mkdir %s: %v %s", target, err, out)

	// An older hlab's cluster, in a directory the postgres user owns.
	old := filepath.Join(root, "old")
	if err := os.Mkdir(old, 0o755); err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := os.Chown(old, uid, gid); err != nil {
		t.Fatal(err)
	}
	oldState := filepath.Join(t.TempDir(), "postgres")
	if err := os.MkdirAll(oldState, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(old, filepath.Join(oldState, dataDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := postgresDir(oldState); err == nil || !strings.Contains(err.Error(), "runuser -u postgres -- rm -rf "+old) {
		t.Errorf("postgresDir of a cluster in a directory the postgres user owns: %v; want a refusal saying how to remove it", err)
	}
	if _, err := Down("postgres", Options{StateDir: oldState}, true); err == nil {
		t.Error("down --purge removed, as root, a cluster in a directory the postgres user owns")
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("purge removed %s: %v", old, err)
	}
}

// TestPrometheusSaysWhatItScrapes: up's help names every target of the
// scrape config it runs, so that a user knows where to run each service.
func TestPrometheusSaysWhatItScrapes(t *testing.T) {
	d, err := Parse("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	targets := regexp.MustCompile(`(?m)^\s*- targets: \["([^"]+)"\]`).FindAllSubmatch(grafana.ScrapeConfig(), -1)
	if len(targets) == 0 {
		t.Fatal("no targets found in deploy/grafana/prometheus.yml")
	}
	for _, m := range targets {
		if !strings.Contains(d.What, string(m[1])) {
			t.Errorf("prometheus's help does not name the target %s: %q", m[1], d.What)
		}
	}
}
