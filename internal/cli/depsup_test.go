package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/highload-lab/hlab/internal/cqlsession"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/depsctl"
	"github.com/highload-lab/hlab/internal/procfs"
	"github.com/highload-lab/hlab/internal/testkit"
)

// depsUpCase is one dependency as hlab deps up runs it.
type depsUpCase struct {
	name string
	args []string // extra flags of up
	// available says why the dependency cannot run here (nil: it can).
	available func() error
	// check uses the connection string: a query, a produce, a ping.
	check func(t *testing.T, ctx context.Context, conn string)
	// keep, when set, stores something before down and persisted checks
	// it is there after the next up: the data outlives down.
	keep, persisted func(t *testing.T, ctx context.Context, conn string)
}

// TestDepsUpDown runs every dependency standalone through the hlab
// binary: up prints one connection string, up again prints the same and
// starts nothing, the string works, down stops the supervisor and the
// dependency and frees the port, and down again says it is not running.
// Postgres, the real Kafka broker and Cassandra also come back from a
// down with their data, at the same string. The cases run in parallel:
// Cassandra alone takes 30-60 s on 2 busy cores.
func TestDepsUpDown(t *testing.T) {
	bin := testkit.HlabBinary(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream "+r.URL.Path) }))
	t.Cleanup(upstream.Close)
	cases := []depsUpCase{
		{name: "postgres", available: func() error { _, _, err := deps.FindPostgres(); return err },
			check: checkPostgres, keep: keepPostgres, persisted: persistedPostgres},
		{name: "kafka", check: checkKafka},
		{name: "kafka-real", available: func() error { s, err := deps.CheckKafka(""); return jvmRuns(s.JVMSetup, err) },
			check: checkKafka, keep: keepKafka, persisted: persistedKafka},
		{name: "cassandra", available: func() error { s, err := deps.CheckCassandra(); return jvmRuns(s.JVMSetup, err) },
			check: checkCassandra, keep: keepCassandra, persisted: persistedCassandra},
		{name: "redis", available: func() error { _, _, err := deps.FindRedis(); return err },
			check: func(t *testing.T, _ context.Context, conn string) { checkRedis(t, conn) }},
		{name: "mongo", available: mongoRuns, check: checkMongo},
		prometheusCase(),
		{name: "nginx", available: func() error { _, _, err := deps.FindNginx(); return err },
			check: func(t *testing.T, ctx context.Context, conn string) {
				checkGet(t, ctx, conn+"/", "hlab nginx: no upstreams")
			}},
		{name: "nginx", args: []string{"--upstream", strings.TrimPrefix(upstream.URL, "http://")},
			available: func() error { _, _, err := deps.FindNginx(); return err },
			check:     func(t *testing.T, ctx context.Context, conn string) { checkGet(t, ctx, conn+"/x", "upstream /x") }},
	}
	for _, tc := range cases {
		label := tc.name
		if len(tc.args) > 0 {
			label += "-upstream"
		}
		t.Run(label, func(t *testing.T) {
			t.Parallel()
			if tc.available != nil {
				if err := tc.available(); err != nil {
					if os.Getenv("HLAB_REQUIRE_DEPS") != "" {
						t.Fatalf("%s cannot run here (HLAB_REQUIRE_DEPS is set): %v", tc.name, err)
					}
					t.Skipf("%s cannot run here: %v", tc.name, err)
				}
			}
			testDepsUpDown(t, bin, tc)
		})
	}
}

func testDepsUpDown(t *testing.T, bin string, tc depsUpCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), tc.name)
	flags := append([]string{"--state-dir", dir}, tc.args...)
	t.Cleanup(func() { testkit.Run(bin, append([]string{"deps", "down", tc.name, "--purge"}, flags...)...) })
	up := func() string {
		start := time.Now()
		out := testkit.RunOK(t, bin, append([]string{"deps", "up", tc.name, "--timeout", "4m"}, flags...)...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 1 || lines[0] == "" || !strings.HasSuffix(out, "\n") {
			t.Fatalf("up printed %q on stdout; want one line, the connection string", out)
		}
		t.Logf("up %s: %s in %s", tc.name, lines[0], time.Since(start).Round(time.Millisecond))
		return lines[0]
	}
	conn := up()
	if again := up(); again != conn {
		t.Errorf("a second up printed %q; want the same string as the first, %q", again, conn)
	}
	s := psState(t, bin, dir)
	if s.Conn != conn || s.Name != tc.name || !procfs.Alive(s.PID) || s.Started.IsZero() {
		t.Errorf("ps: %+v; want %s running at %s", s, tc.name, conn)
	}
	if tc.name != "kafka" && !procfs.Alive(s.DepPID) { // kfake runs inside the supervisor
		t.Errorf("ps: the dependency's pid %d does not run", s.DepPID)
	}
	tc.check(t, ctx, conn)

	if tc.keep != nil {
		tc.keep(t, ctx, conn)
		down(t, bin, tc.name, flags, s, conn)
		if again := up(); again != conn {
			t.Errorf("up after down printed %q; want the same string as before, %q", again, conn)
		}
		tc.check(t, ctx, conn)
		tc.persisted(t, ctx, conn)
		s = psState(t, bin, dir)
	}
	down(t, bin, tc.name, flags, s, conn)
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("down removed the state directory: %v; only --purge should", err)
	}
	if _, stderr, err := testkit.Run(bin, append([]string{"deps", "down", tc.name}, flags...)...); err != nil || !strings.Contains(stderr, "not running") {
		t.Errorf("down of a stopped %s: %v, %q; want exit 0 and 'not running'", tc.name, err, stderr)
	}
	testkit.RunOK(t, bin, append([]string{"deps", "down", tc.name, "--purge"}, flags...)...)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("down --purge left the state directory: %v", err)
	}
}

// down runs hlab deps down and checks that nothing of s remains: not the
// supervisor, not a process of the dependency's group, and its port is
// free.
func down(t *testing.T, bin, name string, flags []string, s depsctl.State, conn string) {
	t.Helper()
	start := time.Now()
	testkit.RunOK(t, bin, append([]string{"deps", "down", name}, flags...)...)
	t.Logf("down %s in %s", name, time.Since(start).Round(time.Millisecond))
	if procfs.Alive(s.PID) {
		t.Errorf("the supervisor (pid %d) still runs after down", s.PID)
	}
	if s.DepPID > 0 {
		if left := groupMembers(s.DepPID); len(left) > 0 {
			t.Errorf("processes of the dependency's group %d still run after down: %v", s.DepPID, left)
		}
	}
	addr := hostPort(t, conn)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after down", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("%s is not free after down: %v", addr, err)
	} else {
		ln.Close()
	}
}

// psState returns what hlab deps ps --json says runs in dir.
func psState(t *testing.T, bin, dir string) depsctl.State {
	t.Helper()
	var states []depsctl.State
	out := testkit.RunOK(t, bin, "deps", "ps", "--json", "--state-dir", dir)
	if err := json.Unmarshal([]byte(out), &states); err != nil || len(states) != 1 {
		t.Fatalf("ps --json: %v: %s; want one state", err, out)
	}
	return states[0]
}

// groupMembers returns the live processes of process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	for pid, st := range procfs.All() {
		if st.PGRP == pgid && st.Live() {
			out = append(out, pid)
		}
	}
	return out
}

// hostPort returns the host:port of a connection string.
func hostPort(t *testing.T, conn string) string {
	t.Helper()
	if !strings.Contains(conn, "://") {
		return strings.Split(conn, ",")[0]
	}
	u, err := url.Parse(conn)
	if err != nil {
		t.Fatalf("connection string %q: %v", conn, err)
	}
	return u.Host
}

// jvmRuns says why a JVM dependency cannot run here, nil when it can.
func jvmRuns(s deps.JVMSetup, err error) error {
	switch {
	case err != nil:
		return err
	case s.JavaErr != nil:
		return s.JavaErr
	case !s.Cached:
		return s.MavenErr
	}
	return nil
}

func mongoRuns() error {
	s, err := deps.CheckMongo()
	if err != nil {
		return err
	}
	if s.JavaErr != nil {
		return s.JavaErr
	}
	if !s.Cached && s.Maven == "" {
		return deps.ErrMongoNeedsMaven
	}
	return nil
}

func checkPostgres(t *testing.T, ctx context.Context, conn string) {
	t.Helper()
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatalf("connect to %s: %v", conn, err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT 1 + 1").Scan(&n); err != nil || n != 2 {
		t.Errorf("SELECT 1 + 1: %d, %v", n, err)
	}
}

func pgExec(t *testing.T, ctx context.Context, conn, sql string) {
	t.Helper()
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatalf("connect to %s: %v", conn, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func keepPostgres(t *testing.T, ctx context.Context, conn string) {
	pgExec(t, ctx, conn, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('across down and up')")
}

func persistedPostgres(t *testing.T, ctx context.Context, conn string) {
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatalf("connect to %s: %v", conn, err)
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "across down and up" {
		t.Errorf("the table made before down: %q, %v; want its row back after up", v, err)
	}
}

// kafkaClient returns a client of the brokers in conn.
func kafkaClient(t *testing.T, conn string) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(conn, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func checkKafka(t *testing.T, ctx context.Context, conn string) {
	t.Helper()
	cl, adm := kafkaClient(t, conn)
	topic := "up-check-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create topic at %s: %v", conn, err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("hello")}).FirstErr(); err != nil {
		t.Errorf("produce to %s: %v", conn, err)
	}
}

func keepKafka(t *testing.T, ctx context.Context, conn string) {
	_, adm := kafkaClient(t, conn)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "kept"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
}

func persistedKafka(t *testing.T, ctx context.Context, conn string) {
	_, adm := kafkaClient(t, conn)
	td, err := adm.ListTopics(ctx, "kept")
	if err != nil || !td.Has("kept") || len(td["kept"].Partitions) != 3 {
		t.Errorf("the topic made before down: %v, %v; want it back with 3 partitions after up", td, err)
	}
}

// cassandraSession opens a session to the node in conn.
func cassandraSession(t *testing.T, conn string) *gocql.Session {
	t.Helper()
	cl := gocql.NewCluster(conn)
	cl.ConnectTimeout, cl.Timeout = 5*time.Second, 20*time.Second
	cl.DisableInitialHostLookup = true
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatalf("CQL session at %s: %v", conn, err)
	}
	t.Cleanup(func() { cqlsession.Close(s) })
	return s
}

func checkCassandra(t *testing.T, ctx context.Context, conn string) {
	var v string
	if err := cassandraSession(t, conn).Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&v); err != nil || v == "" {
		t.Errorf("SELECT release_version at %s: %q, %v", conn, v, err)
	}
}

func keepCassandra(t *testing.T, ctx context.Context, conn string) {
	if err := cassandraSession(t, conn).Query("CREATE KEYSPACE kept WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").WithContext(ctx).Exec(); err != nil {
		t.Fatalf("create keyspace: %v", err)
	}
}

func persistedCassandra(t *testing.T, ctx context.Context, conn string) {
	var name string
	if err := cassandraSession(t, conn).Query("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = 'kept'").WithContext(ctx).Scan(&name); err != nil || name != "kept" {
		t.Errorf("the keyspace made before down: %q, %v; want it back after up", name, err)
	}
}

func checkMongo(t *testing.T, ctx context.Context, conn string) {
	if !strings.HasPrefix(conn, "mongodb://") {
		t.Errorf("connection string %q; want mongodb://", conn)
	}
	c, err := mongo.Connect(options.Client().ApplyURI(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	if err := c.Ping(ctx, nil); err != nil {
		t.Errorf("ping %s: %v", conn, err)
	}
}

func checkGet(t *testing.T, ctx context.Context, url, want string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		t.Errorf("GET %s: %s %q; want 200 and %q", url, resp.Status, body, want)
	}
}

// TestDepsUpBadName: a name that is not a dependency lists the good
// ones, exit 2, and starts nothing.
func TestDepsUpBadName(t *testing.T) {
	for _, args := range [][]string{{"up", "postgress"}, {"down", "mysql"}, {"up", "kafka@0.1"}, {"up"}} {
		var stdout, stderr bytes.Buffer
		dir := t.TempDir()
		code := Main(append(append([]string{"deps"}, args...), "--state-dir", filepath.Join(dir, "x")), &State{Stdout: &stdout, Stderr: &stderr, Getenv: os.Getenv})
		if code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "postgres, kafka, kafka-real") {
			t.Errorf("deps %v: exit %d, stdout %q, stderr %q; want 2, nothing, and the names there are", args, code, stdout.String(), stderr.String())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("deps %v made %v", args, ents)
		}
	}
}

// redisUp runs "hlab deps up redis" in a state directory of t's, stopped
// with down --purge when t ends, and returns the binary, the directory,
// the --state-dir flags and the connection string. Redis, being quick.
func redisUp(t *testing.T) (bin, dir string, flags []string, conn string) {
	t.Helper()
	bin = testkit.HlabBinary(t)
	if _, _, err := deps.FindRedis(); err != nil {
		t.Skip(err)
	}
	dir = filepath.Join(t.TempDir(), "redis")
	flags = []string{"--state-dir", dir}
	t.Cleanup(func() { testkit.Run(bin, append([]string{"deps", "down", "redis", "--purge"}, flags...)...) })
	conn = strings.TrimSpace(testkit.RunOK(t, bin, append([]string{"deps", "up", "redis"}, flags...)...))
	return bin, dir, flags, conn
}

// TestDepsSupervisorKilled: a supervisor killed with SIGKILL takes its
// dependency with it (no orphan holds the port), ps no longer lists it,
// and the next up starts it again at the same string. Redis, being quick.
func TestDepsSupervisorKilled(t *testing.T) {
	bin, dir, flags, conn := redisUp(t)
	s := psState(t, bin, dir)
	if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the supervisor and redis gone after SIGKILL", func() bool {
		return !procfs.Alive(s.PID) && len(groupMembers(s.DepPID)) == 0
	})
	if out := testkit.RunOK(t, bin, "deps", "ps", "--json", "--state-dir", dir); strings.TrimSpace(out) != "[]" {
		t.Errorf("ps after the supervisor died: %s; want []", out)
	}
	if again := strings.TrimSpace(testkit.RunOK(t, bin, append([]string{"deps", "up", "redis"}, flags...)...)); again != conn {
		t.Errorf("up after the supervisor died: %q; want %q again", again, conn)
	}
	checkRedis(t, conn)
}

// TestDepsUpPortTaken: when another process holds the port a dependency
// had, up fails (exit 1) saying so, with nothing on stdout and nothing
// left running.
func TestDepsUpPortTaken(t *testing.T) {
	bin, dir, flags, conn := redisUp(t)
	testkit.RunOK(t, bin, append([]string{"deps", "down", "redis"}, flags...)...)
	ln, err := net.Listen("tcp", hostPort(t, conn))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, errOut, err := testkit.Run(bin, append([]string{"deps", "up", "redis", "--timeout", "30s"}, flags...)...)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || out != "" || !strings.Contains(errOut, "in use by another process") {
		t.Errorf("up with its port taken: %v, stdout %q, stderr %q; want exit 1, nothing, and why", err, out, errOut)
	}
	if st, _ := os.ReadFile(filepath.Join(dir, "state.json")); len(st) != 0 {
		t.Errorf("a state file after a failed up: %s", st)
	}
}

func checkRedis(t *testing.T, conn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := deps.PingRedis(ctx, hostPort(t, conn)); err != nil {
		t.Errorf("PING %s: %v", conn, err)
	}
}

// TestDepsUpTopics: up kafka --topics creates the missing topics with the
// broker's default partitions (or --partitions), leaves those that exist
// as they are, and is refused for a dependency that is not a Kafka.
func TestDepsUpTopics(t *testing.T) {
	bin := testkit.HlabBinary(t)
	dir := filepath.Join(t.TempDir(), "kafka")
	flags := []string{"--state-dir", dir}
	t.Cleanup(func() { testkit.Run(bin, append([]string{"deps", "down", "kafka", "--purge"}, flags...)...) })
	conn := strings.TrimSpace(testkit.RunOK(t, bin, append([]string{"deps", "up", "kafka", "--topics", "orders,payments"}, flags...)...))
	again := strings.TrimSpace(testkit.RunOK(t, bin, append([]string{"deps", "up", "kafka", "--topics", "orders,audit", "--partitions", "2"}, flags...)...))
	if again != conn {
		t.Fatalf("second up: %q, want %q", again, conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, adm := kafkaClient(t, conn)
	details, err := adm.ListTopics(ctx, "orders", "payments", "audit")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{"orders": deps.DefaultKafkaPartitions, "payments": deps.DefaultKafkaPartitions, "audit": 2} {
		if got := len(details[topic].Partitions); got != want {
			t.Errorf("topic %s: %d partitions, want %d", topic, got, want)
		}
	}
	if _, errOut, err := testkit.Run(bin, "deps", "up", "postgres", "--topics", "x", "--state-dir", filepath.Join(t.TempDir(), "pg")); err == nil || !strings.Contains(errOut, "--topics is for kafka") {
		t.Errorf("up postgres --topics: %v, %q; want it refused", err, errOut)
	}
}
