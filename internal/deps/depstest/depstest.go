// Package depstest gives a package's tests real dependencies that are slow
// to start (a Kafka broker takes ~5 s, a Cassandra node 10-30 s) as one
// shared instance per test binary: started on first use, stopped when the
// tests end. It also runs one suite against every kind of a dependency,
// the embedded default and the real one, as franz-go's CI runs kfake and
// Apache Kafka.
//
//	func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }
//
//	func TestPublish(t *testing.T) {
//		for _, kind := range deps.KafkaKinds {
//			t.Run(string(kind), func(t *testing.T) {
//				k := depstest.Kafka(t, kind) // skips "real" in -short mode
//				topic := depstest.Topic(t, k, 4)
//				cl := depstest.Client(t, k)
//				...
//			})
//		}
//	}
//
// KafkaCluster shares a real cluster of three brokers the same way, for
// tests that crash brokers one at a time (KillNode, StartNode).
//
// The shared instances outlive each test, so tests that share one use
// their own topics and consumer groups (Topic and Group make unique names).
// A fault test that takes the broker down (StopBroker, Outage) must not run
// in parallel with tests on the same instance; it can ask NewKafka for an
// instance of its own instead.
//
// Environment:
//   - HLAB_TEST_KAFKA=kfake (or "real") runs only that kind; the other's
//     tests skip.
//   - HLAB_TEST_KAFKA_VERSION=4.3.1 runs the real broker of that version
//     (default: deps.DefaultKafkaVersion).
//   - HLAB_TEST_CASSANDRA=skip skips the tests that use the shared
//     Cassandra node (Cassandra); -short skips them too.
//   - HLAB_REQUIRE_DEPS=1 (set by make test) turns "java/mvn missing" skips
//     into failures, so CI cannot pass by skipping; -short still skips the
//     real broker.
package depstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/sandbox"
)

var (
	mu      sync.Mutex
	running bool
	sb      *sandbox.Sandbox
	sbErr   error
	kafkas  = map[deps.KafkaKind]*sharedKafka{}
	cluster = sharedKafka{what: "kafka cluster"}
	seq     atomic.Int64

	cassandra sharedCassandra
	postgres  sharedPostgres
)

type sharedPostgres struct {
	once sync.Once
	pg   *deps.Postgres
	err  error
}

type sharedCassandra struct {
	once sync.Once
	c    *deps.Cassandra
	err  error
}

type sharedKafka struct {
	once sync.Once
	what string // how logs and errors name it: "kfake", "secured kafka", ...
	k    *deps.Kafka
	err  error
}

// get returns the shared Kafka, started from cfg (its Version taken from
// $HLAB_TEST_KAFKA_VERSION) by the first test that asks; t fails when it
// did not start, and so does every later test.
func (s *sharedKafka) get(t testing.TB, box *sandbox.Sandbox, cfg deps.KafkaConfig) *deps.Kafka {
	t.Helper()
	s.once.Do(func() {
		start := time.Now()
		cfg.Version = os.Getenv("HLAB_TEST_KAFKA_VERSION")
		s.k, s.err = deps.StartKafka(context.Background(), box, cfg)
		if s.err == nil {
			t.Logf("depstest: started the shared %s (%s) at %v in %s", s.what, s.k.Kind, s.k.Brokers, time.Since(start).Round(time.Millisecond))
		}
	})
	if s.err != nil {
		t.Fatalf("depstest: the shared %s did not start (later tests get the same error): %v", s.what, s.err)
	}
	return s.k
}

// stop stops the shared Kafka if a test started it.
func (s *sharedKafka) stop() {
	if s.k == nil {
		return
	}
	if err := s.k.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "depstest: stop the shared %s: %v\n", s.what, err)
	}
}

// Run runs the package's tests, then stops every shared dependency they
// started. A package whose tests use Kafka, SecureKafka, NewKafka,
// Cassandra or Postgres calls it from TestMain: os.Exit(depstest.Run(m)).
func Run(m *testing.M) int {
	mu.Lock()
	running = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	for _, s := range kafkas {
		s.stop()
	}
	secure.stop()
	cluster.stop()
	if cassandra.c != nil {
		if err := cassandra.c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "depstest: stop shared cassandra: %v\n", err)
		}
	}
	if postgres.pg != nil {
		if err := postgres.pg.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "depstest: stop shared postgres: %v\n", err)
		}
	}
	if sb != nil {
		if err := sb.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "depstest: close sandbox: %v\n", err)
		}
	}
	running = false
	return code
}

// Sandbox returns the sandbox the test binary's dependencies run in (no
// quotas unless asked), created on first use and closed by Run.
func Sandbox(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !running {
		t.Fatal("depstest: shared dependencies need the package's TestMain to call os.Exit(depstest.Run(m))")
	}
	if sb == nil && sbErr == nil {
		sb, sbErr = sandbox.New()
	}
	if sbErr != nil {
		t.Fatalf("depstest: sandbox: %v", sbErr)
	}
	return sb
}

// Kafka returns the test binary's shared Kafka of kind, starting it on
// first use (kfake in about a millisecond, the real broker in ~5 s, plus
// a one-off download of its jars). It skips the test when that kind is
// not wanted (-short or HLAB_TEST_KAFKA for the real broker) or cannot run
// here (java or mvn missing, unless HLAB_REQUIRE_DEPS=1). A broker that a
// previous test left stopped is started again.
func Kafka(t testing.TB, kind deps.KafkaKind) *deps.Kafka {
	t.Helper()
	if kind == "" {
		kind = deps.KafkaFake
	}
	skipUnwanted(t, kind)
	box := Sandbox(t)
	mu.Lock()
	s := kafkas[kind]
	if s == nil {
		s = &sharedKafka{what: string(kind) + " kafka"}
		kafkas[kind] = s
	}
	mu.Unlock()
	s.get(t, box, deps.KafkaConfig{Kind: kind})
	if err := s.k.StartBroker(context.Background()); err != nil {
		t.Fatalf("depstest: restart the shared %s after an earlier test stopped it: %v", s.k.Kind, err)
	}
	return s.k
}

// KafkaCluster returns the test binary's shared real Kafka cluster of
// deps.ClusterNodes brokers and a KRaft controller (replication 3,
// min.insync.replicas 2), starting it on first use (some 10-20 s: four
// JVMs at once). It skips like Kafka(t, deps.KafkaReal). Every node that
// a previous test left down is started again, and every partition's
// replicas are in sync when it returns: each test starts on a healthy
// cluster.
//
// A cluster costs three JVMs: keep the tests that need one in one
// package, so that a run of every package starts one cluster. Tests that
// kill nodes must not run in parallel with others on the cluster; each
// uses topics of its own (Topic), and AwaitInSync before its next crash.
func KafkaCluster(t testing.TB) *deps.Kafka {
	t.Helper()
	skipUnwanted(t, deps.KafkaReal)
	box := Sandbox(t)
	cluster.get(t, box, deps.KafkaConfig{
		Kind: deps.KafkaReal, Nodes: deps.ClusterNodes,
		// Three heaps on a test machine: 256 MB each is plenty for
		// the tests' few megabytes of records.
		JVMConfig: deps.JVMConfig{HeapMB: 256},
	})
	if err := cluster.k.StartBroker(context.Background()); err != nil {
		t.Fatalf("depstest: restart the shared kafka cluster's nodes after an earlier test killed them: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.k.AwaitInSync(ctx); err != nil {
		t.Fatalf("depstest: the shared kafka cluster did not heal after an earlier test's faults: %v", err)
	}
	return cluster.k
}

// KillNode SIGKILLs node id of a cluster (deps.Kafka.KillNode) and makes
// sure it runs again when t ends, even when t fails before starting it.
func KillNode(t testing.TB, k *deps.Kafka, id int32) {
	t.Helper()
	t.Cleanup(func() {
		if err := k.StartNode(context.Background(), id); err != nil && !errors.Is(err, deps.ErrKafkaStopped) {
			t.Errorf("depstest: start kafka node %d again: %v", id, err)
		}
	})
	start := time.Now()
	if err := k.KillNode(id); err != nil {
		t.Fatalf("depstest: kill kafka node %d: %v", id, err)
	}
	t.Logf("depstest: kafka node %d killed (SIGKILL) in %s", id, time.Since(start).Round(time.Millisecond))
}

// StartNode starts node id of a cluster again and waits until the
// cluster lists it.
func StartNode(t testing.TB, k *deps.Kafka, id int32) {
	t.Helper()
	start := time.Now()
	if err := k.StartNode(context.Background(), id); err != nil {
		t.Fatalf("depstest: start kafka node %d again: %v", id, err)
	}
	t.Logf("depstest: kafka node %d back in %s", id, time.Since(start).Round(time.Millisecond))
}

// NewKafka starts a Kafka of cfg.Kind for t alone and stops it when t
// ends: for a test that needs its own configuration, or takes the broker
// down while other tests run. It skips like Kafka.
func NewKafka(t testing.TB, cfg deps.KafkaConfig) *deps.Kafka {
	t.Helper()
	skipUnwanted(t, cfg.Kind)
	box := Sandbox(t)
	start := time.Now()
	k, err := deps.StartKafka(context.Background(), box, cfg)
	if err != nil {
		t.Fatalf("depstest: start kafka: %v", err)
	}
	t.Logf("depstest: started %s at %v in %s", k.Kind, k.Brokers, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Errorf("depstest: stop %s: %v", k.Kind, err)
		}
	})
	return k
}

// skipUnwanted skips t when kind is not to run here.
func skipUnwanted(t testing.TB, kind deps.KafkaKind) {
	t.Helper()
	if kind == "" {
		kind = deps.KafkaFake
	}
	if only := os.Getenv("HLAB_TEST_KAFKA"); only != "" && !strings.Contains(only, string(kind)) {
		t.Skipf("depstest: HLAB_TEST_KAFKA=%s: not running against %s", only, kind)
	}
	if kind != deps.KafkaReal {
		return
	}
	if testing.Short() {
		t.Skip("depstest: -short: no real kafka broker")
	}
	setup, err := deps.CheckKafka(os.Getenv("HLAB_TEST_KAFKA_VERSION"))
	skipUnlessJVMRuns(t, "the real kafka broker", err, setup.JavaErr, setup.MavenErr, setup.Cached)
}

// skipUnlessJVMRuns skips t, or fails it when HLAB_REQUIRE_DEPS is set,
// when the JVM dependency what cannot run here: its check failed, it has
// no Java, or its jars are neither cached nor downloadable.
func skipUnlessJVMRuns(t testing.TB, what string, err, javaErr, mavenErr error, cached bool) {
	t.Helper()
	if err == nil && javaErr != nil {
		err = javaErr
	}
	if err == nil && !cached && mavenErr != nil {
		err = mavenErr
	}
	if err != nil {
		if os.Getenv("HLAB_REQUIRE_DEPS") != "" {
			t.Fatalf("depstest: %s cannot run here (HLAB_REQUIRE_DEPS is set): %v", what, err)
		}
		t.Skipf("depstest: %s cannot run here: %v", what, err)
	}
}

// stoppable is a shared server that fault tests take down and bring back:
// a Kafka broker, a Cassandra node.
type stoppable struct {
	what       string // "the broker", "cassandra": in failures
	kind       string // the server's Kind: in logs
	stop       func() error
	start      func(context.Context) error
	errStopped error // what start returns after a stop for good
}

func broker(k *deps.Kafka) stoppable {
	return stoppable{"the broker", k.Kind, k.StopBroker, k.StartBroker, deps.ErrKafkaStopped}
}

func node(c *deps.Cassandra) stoppable {
	return stoppable{"cassandra", c.Kind, c.StopServer, c.StartServer, deps.ErrCassandraStopped}
}

// down stops s and makes sure it is back when t ends, even when t fails
// before starting it again.
func (s stoppable) down(t testing.TB) {
	t.Helper()
	s.backAtEnd(t)
	start := time.Now()
	if err := s.stop(); err != nil {
		t.Fatalf("depstest: stop %s: %v", s.what, err)
	}
	t.Logf("depstest: %s stopped in %s", s.kind, time.Since(start).Round(time.Millisecond))
}

// backAtEnd starts s again when t ends, unless it was stopped for good.
func (s stoppable) backAtEnd(t testing.TB) {
	t.Cleanup(func() {
		if err := s.start(context.Background()); err != nil && !errors.Is(err, s.errStopped) {
			t.Errorf("depstest: start %s again: %v", s.what, err)
		}
	})
}

// up starts s again and waits until it answers.
func (s stoppable) up(t testing.TB) {
	t.Helper()
	start := time.Now()
	if err := s.start(context.Background()); err != nil {
		t.Fatalf("depstest: start %s again: %v", s.what, err)
	}
	t.Logf("depstest: %s back in %s", s.kind, time.Since(start).Round(time.Millisecond))
}

// StopBroker takes k's broker down (see deps.Kafka.StopBroker) and makes
// sure it is back when t ends, even when t fails before starting it again.
func StopBroker(t testing.TB, k *deps.Kafka) {
	t.Helper()
	broker(k).down(t)
}

// StartBroker brings back a broker taken down by StopBroker and waits
// until it answers metadata requests.
func StartBroker(t testing.TB, k *deps.Kafka) {
	t.Helper()
	broker(k).up(t)
}

// Outage crashes k's broker (SIGKILL) for d and brings it back, returning
// once it answers again (deps.Kafka.Outage): run it in a goroutine beside the
// load, or inline between phases ("the broker is gone for 10 s under
// load"). The broker is back when t ends, even when t fails meanwhile.
func Outage(t testing.TB, k *deps.Kafka, d time.Duration) {
	t.Helper()
	broker(k).backAtEnd(t)
	start := time.Now()
	if err := k.Outage(context.Background(), d); err != nil {
		t.Fatalf("depstest: broker outage: %v", err)
	}
	t.Logf("depstest: %s down for %s, back %s later", k.Kind, d, (time.Since(start) - d).Round(time.Millisecond))
}

// Topic creates a topic with partitions partitions (0 = the broker's
// default) named after t, unique in the test binary, and deletes it when t
// ends.
func Topic(t testing.TB, k *deps.Kafka, partitions int) string {
	t.Helper()
	topic := Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.CreateTopics(ctx, partitions, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.DeleteTopics(ctx, topic) // best effort: a stopped broker keeps it
	})
	return topic
}

// Group returns a consumer group name unique in the test binary.
func Group(t testing.TB) string { return "group-" + Name(t) }

var unsafe = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// Name returns a name for t unique in the test binary that is a valid
// Kafka topic name.
func Name(t testing.TB) string {
	n := strings.Trim(unsafe.ReplaceAllString(t.Name(), "."), ".")
	if len(n) > 180 {
		n = n[len(n)-180:]
	}
	return fmt.Sprintf("%s-%d", n, seq.Add(1))
}

// Client returns a franz-go client seeded with k's brokers, closed when t
// ends.
func Client(t testing.TB, k *deps.Kafka, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := k.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Cassandra returns the test binary's shared Cassandra node, starting it
// on first use (10-30 s on 2 busy cores, plus a one-off download of its
// jars): Cassandra's own default commit log (periodic), 1 GB heap, no
// quota. It skips the test in -short mode, with HLAB_TEST_CASSANDRA=skip,
// or when java or mvn is missing (unless HLAB_REQUIRE_DEPS=1). A node that
// a previous test left stopped is started again. Tests that share it use
// keyspaces or tables of their own (Name makes unique names; replace
// '-' and '.', which CQL names do not allow).
func Cassandra(t testing.TB) *deps.Cassandra {
	t.Helper()
	skipCassandra(t)
	box := Sandbox(t)
	cassandra.once.Do(func() {
		start := time.Now()
		cassandra.c, cassandra.err = deps.StartCassandra(context.Background(), box, deps.CassandraConfig{})
		if cassandra.err == nil {
			t.Logf("depstest: started the shared %s at %s in %s", cassandra.c.Kind, cassandra.c.Addr, time.Since(start).Round(time.Millisecond))
		}
	})
	if cassandra.err != nil {
		t.Fatalf("depstest: the shared cassandra did not start (later tests get the same error): %v", cassandra.err)
	}
	if err := cassandra.c.StartServer(context.Background()); err != nil {
		t.Fatalf("depstest: restart the shared cassandra after an earlier test stopped it: %v", err)
	}
	return cassandra.c
}

// skipCassandra skips t when the real Cassandra is not to run here.
func skipCassandra(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("depstest: -short: no real cassandra")
	}
	if os.Getenv("HLAB_TEST_CASSANDRA") == "skip" {
		t.Skip("depstest: HLAB_TEST_CASSANDRA=skip")
	}
	setup, err := deps.CheckCassandra()
	skipUnlessJVMRuns(t, "cassandra", err, setup.JavaErr, setup.MavenErr, setup.Cached)
}

// StopCassandra takes c down (see deps.Cassandra.StopServer) and makes
// sure it is back when t ends, even when t fails before starting it
// again. A test that does this must not run in parallel with others on
// the shared node.
func StopCassandra(t testing.TB, c *deps.Cassandra) {
	t.Helper()
	node(c).down(t)
}

// StartCassandra brings back a node taken down by StopCassandra and waits
// until it answers CQL.
func StartCassandra(t testing.TB, c *deps.Cassandra) {
	t.Helper()
	node(c).up(t)
}

// Postgres returns the real PostgreSQL shared by the test binary (default
// settings), started on first use and stopped by Run; tests isolate
// themselves with a database each (Postgres.CreateDatabase). PostgreSQL
// is part of the project's dependencies (make deps): without it the test
// fails with how to install it, it is never skipped.
func Postgres(t testing.TB) *deps.Postgres {
	t.Helper()
	box := Sandbox(t)
	postgres.once.Do(func() {
		if _, _, err := deps.FindPostgres(); err != nil {
			postgres.err = err
			return
		}
		start := time.Now()
		postgres.pg, postgres.err = deps.StartPostgres(context.Background(), box, deps.PostgresConfig{})
		if postgres.err == nil {
			t.Logf("depstest: started the shared %s in %s", postgres.pg.Kind, time.Since(start).Round(time.Millisecond))
		}
	})
	if postgres.err != nil {
		t.Fatalf("depstest: the shared postgres did not start (later tests get the same error): %v", postgres.err)
	}
	return postgres.pg
}

// NewMongo starts a MongoDB stand-in (mongo-java-server, see
// internal/deps) for t alone, in a sandbox of its own, so it needs no
// TestMain (about 0.5 s); it is stopped when t ends. It skips t when the
// stand-in cannot run here (no JDK, or no jars and no mvn), or fails it
// when HLAB_REQUIRE_DEPS is set.
func NewMongo(t testing.TB) *deps.Mongo {
	t.Helper()
	setup, err := deps.CheckMongo()
	skipUnlessJVMRuns(t, "the MongoDB stand-in", err, setup.JavaErr, deps.ErrMongoNeedsMaven, setup.Cached || setup.Maven != "")
	box, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close() })
	// The context bounds the stand-in's life; its StartTimeout (30 s)
	// bounds the wait.
	m, err := deps.StartMongo(context.Background(), box, deps.MongoConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop() })
	t.Logf("depstest: MongoDB runs as a stand-in here: %s at %s", m.Kind, m.Addr)
	return m
}
