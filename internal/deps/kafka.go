package deps

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/kafkatopic"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// KafkaKind says which Kafka StartKafka runs.
type KafkaKind string

const (
	// KafkaFake is franz-go's kfake: a fake cluster in the calling process
	// that speaks the Kafka protocol (produce, fetch, consumer groups,
	// idempotence, transactions). It is the embedded default, starts in
	// about a millisecond, keeps everything in memory, and is labelled
	// "kfake (embedded)" wherever a run records its environment.
	KafkaFake KafkaKind = "kfake"
	// KafkaReal is Apache Kafka itself: a single-node KRaft broker
	// (combined broker and controller), or a cluster of such nodes
	// (KafkaConfig.Nodes), run on the JVM from Maven Central's jars, which
	// FetchKafka downloads once into the cache.
	KafkaReal KafkaKind = "real"
)

// KafkaKinds lists the kinds, the embedded default first.
var KafkaKinds = []KafkaKind{KafkaFake, KafkaReal}

// ParseKafkaKind parses a kind as given on a command line ("" = kfake).
func ParseKafkaKind(s string) (KafkaKind, error) {
	switch KafkaKind(strings.ToLower(strings.TrimSpace(s))) {
	case "", KafkaFake, "embedded":
		return KafkaFake, nil
	case KafkaReal, "kafka":
		return KafkaReal, nil
	}
	return "", fmt.Errorf("deps: unknown kafka kind %q: use kfake (embedded) or real", s)
}

// DefaultKafkaPartitions is the partition count of topics created without
// one (KafkaConfig.Partitions, CreateTopics with 0): kfake's own default,
// and enough for a handful of consumers per group.
const DefaultKafkaPartitions = 10

var (
	// ErrJavaNotInstalled is returned by StartKafka and FetchKafka for the
	// real broker when no java (17 or newer) is found.
	ErrJavaNotInstalled = errors.New("deps: java 17 or newer is not installed (install it with 'apt-get install -y openjdk-17-jre-headless maven', or run 'make deps'; the embedded kfake needs nothing)")

	// ErrMavenNotInstalled is returned by StartKafka and FetchKafka when the
	// Kafka jars are not cached yet and no mvn is found to fetch them.
	ErrMavenNotInstalled = errors.New("deps: maven is not installed, and it fetches the Kafka jars (install it with 'apt-get install -y openjdk-17-jre-headless maven', or run 'make deps'; the embedded kfake needs nothing)")

	// ErrKafkaStopped is returned by Kafka.StartBroker after Kafka.Stop.
	ErrKafkaStopped = errors.New("deps: kafka was stopped")
)

// KafkaConfig is what StartKafka needs. The zero value starts kfake with
// DefaultKafkaPartitions partitions per topic.
type KafkaConfig struct {
	Kind KafkaKind // "" = KafkaFake
	// Partitions is the partition count of Topics and of topics created
	// without one (num.partitions); 0 = DefaultKafkaPartitions.
	Partitions int
	// Topics are created before StartKafka returns. Neither kind creates a
	// topic on first use (auto.create.topics.enable=false): producing to or
	// fetching from an unknown topic fails with UNKNOWN_TOPIC_OR_PARTITION.
	Topics []string
	// Port is the broker's port (for kfake too); 0 = a free one. The real
	// broker's controller port is a free one either way. In a cluster it
	// is the first node's; the others' are free ones.
	Port int
	// Nodes is the real Kafka's broker count: 0 or 1 is a single node,
	// broker and controller in one. More make a cluster on 127.0.0.1 of
	// that many brokers (node.id 1..Nodes) and a KRaft controller of its
	// own (node.id Nodes+1), which the brokers' crashes leave running:
	// topics, the internal ones included, are replicated min(Nodes, 3)
	// times with min.insync.replicas one less, and no out-of-sync replica
	// is ever elected leader. ClusterNodes (3) is the cluster that takes
	// writes through one broker's crash and refuses them, rather than
	// lose them, through two.
	Nodes int

	// The fields below apply to the real broker only.

	Version string // Kafka version, one of KafkaVersions(); "" = DefaultKafkaVersion
	// Dir holds server.properties, the logs (server.log, stdout.log) and,
	// under data/, the partitions. "" = a temporary directory that Stop
	// removes; a given Dir keeps its logs after Stop, and loses data/
	// unless Keep.
	Dir string
	// Keep starts the broker on the topics and records already in Dir
	// (a previous run's) and leaves them there on Stop: a standalone
	// broker's data outlives a restart (hlab deps up/down). Needs Dir.
	Keep bool
	// JVMConfig: the heap defaults to 512 MB; StartTimeout bounds the
	// wait for the broker to answer a metadata request (also after
	// StartBroker), 0 = 60 s.
	JVMConfig
	// Secure adds TLS and SASL listeners to the real broker (see
	// SecureKafka); kfake has none.
	Secure bool
}

// Kafka is a running Kafka of either kind. Its methods are safe for
// concurrent use.
type Kafka struct {
	// Kind labels what runs, for a run's environment record:
	// "kfake (embedded)" or "kafka 3.9.2".
	Kind     string
	Embedded bool     // true for kfake
	Version  string   // the real broker's Kafka version; "" for kfake
	Brokers  []string // bootstrap addresses, host:port on 127.0.0.1
	// Dir is the real broker's directory (server.properties, server.log,
	// data/), a cluster's the one that holds a node-ID directory per node;
	// "" for kfake.
	Dir string
	// Secure describes the secured listeners of a broker started with
	// KafkaConfig.Secure; nil otherwise.
	Secure *SecureKafka

	partitions int

	// kfake
	fake   *kfake.Cluster
	fakeLn *switchListener

	// real: its brokers, node.id i+1 at i; a cluster's controller;
	// ownDir: a cluster's temporary Dir, removed by Stop
	nodes      []*realBroker
	controller *realBroker
	ownDir     bool
}

// all returns every process of the real Kafka: its brokers and a
// cluster's controller.
func (k *Kafka) all() []*realBroker {
	if k.controller == nil {
		return k.nodes
	}
	return append(slices.Clip(k.nodes), k.controller)
}

// ClusterNodes is the broker count of a replicated cluster
// (KafkaConfig.Nodes): replication 3, min.insync.replicas 2.
const ClusterNodes = 3

// StartKafka starts a Kafka of cfg.Kind and returns once it is ready (the
// real broker: once it answers a metadata request) and cfg.Topics exist.
// The real broker runs under sb (sb may be nil for kfake). ctx bounds the
// wait and, for both kinds, the life of what it starts, as with
// sandbox.Start: canceling it stops the broker.
func StartKafka(ctx context.Context, sb *sandbox.Sandbox, cfg KafkaConfig) (*Kafka, error) {
	defaults.Positive(&cfg.Partitions, DefaultKafkaPartitions)
	defaults.Positive(&cfg.StartTimeout, 60*time.Second)
	var (
		k   *Kafka
		err error
	)
	switch cfg.Kind {
	case "", KafkaFake:
		if cfg.Secure {
			return nil, errSecureNeedsReal
		}
		if k, err = startFake(cfg); err == nil {
			context.AfterFunc(ctx, k.fake.Close)
		}
	case KafkaReal:
		if sb == nil {
			return nil, errors.New("deps: the real kafka broker needs a sandbox")
		}
		k, err = startReal(ctx, sb, cfg)
	default:
		return nil, fmt.Errorf("deps: unknown kafka kind %q: use %q or %q", cfg.Kind, KafkaFake, KafkaReal)
	}
	if err != nil {
		return nil, err
	}
	if len(cfg.Topics) > 0 && !k.Embedded { // kfake seeds them itself
		if err := k.CreateTopics(ctx, 0, cfg.Topics...); err != nil {
			k.Stop()
			return nil, err
		}
	}
	return k, nil
}

// startFake starts a one-broker kfake cluster on 127.0.0.1 and a free port.
func startFake(cfg KafkaConfig) (*Kafka, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(1), // like the real single node: one leader, one coordinator
		kfake.DefaultNumPartitions(cfg.Partitions),
	}
	if cfg.Port != 0 {
		opts = append(opts, kfake.Ports(cfg.Port))
	}
	if len(cfg.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(cfg.Partitions), cfg.Topics...))
	}
	sl := &switchListener{conns: map[*trackedConn]struct{}{}}
	sl.cond = sync.NewCond(&sl.mu)
	opts = append(opts, kfake.ListenFn(sl.listen))
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("deps: start kfake: %w", err)
	}
	return &Kafka{
		Kind: "kfake (embedded)", Embedded: true,
		Brokers:    c.ListenAddrs(),
		partitions: cfg.Partitions,
		fake:       c,
		fakeLn:     sl,
	}, nil
}

// Proc returns the real broker's current process (a new one after each
// StartBroker; a cluster's first node's), or nil for kfake and while the
// broker is stopped.
func (k *Kafka) Proc() *sandbox.Process {
	if len(k.nodes) == 0 {
		return nil
	}
	return k.nodes[0].process()
}

// Stop stops the broker for good: kfake closes; the real broker gets
// SIGTERM (a controlled shutdown), SIGKILL after 15 s, and its data is
// removed. Every node of a cluster stops at once. Stop is idempotent.
func (k *Kafka) Stop() error {
	if k.fake != nil {
		k.fake.Close()
		return nil
	}
	// The brokers first: a controlled shutdown asks the controller.
	err := eachNode(k.nodes, (*realBroker).stop)
	if k.controller != nil {
		err = errors.Join(err, k.controller.stop())
	}
	if k.ownDir {
		os.RemoveAll(k.Dir)
	}
	return err
}

// StopBroker takes the broker down until StartBroker, keeping its topics,
// records, committed offsets and addresses: for fault tests that need a
// controlled shutdown. The real broker shuts down (SIGTERM, SIGKILL after
// 15 s; every node of a cluster); kfake closes its listening socket and
// every connection, while its state stays in memory. Either way clients
// see their connections drop and new ones refused. KillBroker is the crash.
func (k *Kafka) StopBroker() error {
	if k.fake != nil {
		return k.fakeLn.down()
	}
	err := eachNode(k.nodes, (*realBroker).stopServer)
	if k.controller != nil {
		err = errors.Join(err, k.controller.stopServer())
	}
	return err
}

// KillBroker crashes the broker until StartBroker: the real broker's JVM
// (every node of a cluster) gets SIGKILL, as from a power cut or the OOM
// killer, with no controlled shutdown, so that it recovers its logs when
// it starts again; what it acknowledged (flushed to the page cache, which
// survives the process) stays. kfake goes down as StopBroker takes it,
// which is a crash already: its connections drop without a goodbye.
func (k *Kafka) KillBroker() error {
	if k.fake != nil {
		return k.fakeLn.down()
	}
	return eachNode(k.all(), (*realBroker).killServer)
}

// StartBroker brings back a broker taken down by StopBroker or
// KillBroker (every node of a cluster that is down), on the same
// addresses, and returns once it answers a metadata request again (the
// real broker takes a few seconds: it starts a new JVM and recovers its
// logs). ctx bounds that wait only. Calling it on a running broker does
// nothing.
func (k *Kafka) StartBroker(ctx context.Context) error {
	if k.fake != nil {
		return k.fakeLn.up()
	}
	return eachNode(k.all(), func(r *realBroker) error { return r.startServer(ctx) })
}

// Outage crashes the broker (KillBroker) for d, or until ctx ends, then
// brings it back on the same addresses (StartBroker) and returns once it
// answers again: "the broker is gone for 10 s under load". Run it in a
// goroutine beside the load, or inline between phases.
func (k *Kafka) Outage(ctx context.Context, d time.Duration) error {
	if err := k.KillBroker(); err != nil {
		return err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	// Back even when ctx was cancelled meanwhile: others use the broker.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	return k.StartBroker(bctx)
}

// NewClient returns a franz-go client seeded with the brokers; opts come
// after the seeds and may add to or override anything. The caller closes it.
func (k *Kafka) NewClient(opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("deps: kafka client: %w", err)
	}
	return cl, nil
}

// CreateTopics creates topics with partitions partitions each (0 = the
// broker's default, KafkaConfig.Partitions) and the broker's default
// replication factor (1 on a single node, 3 in a cluster). A
// topic that exists already is an error wrapping
// kerr.TopicAlreadyExists.
func (k *Kafka) CreateTopics(ctx context.Context, partitions int, topics ...string) error {
	defaults.Positive(&partitions, k.partitions)
	return k.admin(func(adm *kadm.Client) error {
		if err := kafkatopic.Create(ctx, adm, partitions, topics...); err != nil {
			return fmt.Errorf("deps: %w", err)
		}
		return nil
	})
}

// DeleteTopics deletes topics; a topic that does not exist is an error
// wrapping kerr.UnknownTopicOrPartition.
func (k *Kafka) DeleteTopics(ctx context.Context, topics ...string) error {
	return k.admin(func(adm *kadm.Client) error {
		rs, err := adm.DeleteTopics(ctx, topics...)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			return fmt.Errorf("deps: delete kafka topics %v: %w", topics, err)
		}
		return nil
	})
}

// admin runs fn with an admin client that lives for the call.
func (k *Kafka) admin(fn func(*kadm.Client) error) error {
	cl, err := k.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(kadm.NewClient(cl))
}

// awaitKafka asks brokers for metadata until one answers with node self
// among the registered brokers (a KRaft broker is listed only once it is
// unfenced, i.e. ready for topics; a node of a cluster, once a majority
// of the controller quorum runs), ctx ends, or timeout passes. exited,
// when non-nil, aborts the wait: a process that died will never answer.
func awaitKafka(ctx context.Context, brokers []string, self int32, timeout time.Duration, exited <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DialTimeout(time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		return fmt.Errorf("deps: kafka client: %w", err)
	}
	defer cl.Close()
	return awaitReady(ctx, fmt.Sprintf("kafka at %v", brokers), "did not answer a metadata request", timeout, 100*time.Millisecond, exited, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m, err := freshMetadata(ctx, cl)
		if err != nil {
			return err
		}
		for _, b := range m.Brokers {
			if b.NodeID == self {
				return nil
			}
		}
		return fmt.Errorf("node %d not registered yet", self)
	})
}

// awaitListening waits until addr accepts TCP connections: a KRaft
// controller answers its brokers only.
func awaitListening(ctx context.Context, addr string, timeout time.Duration, exited <-chan struct{}) error {
	var d net.Dialer
	return awaitReady(ctx, "kafka controller at "+addr, "did not listen", timeout, 100*time.Millisecond, exited, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// freshMetadata asks a broker which brokers the cluster has now.
// kadm's BrokerMetadata answers from the client's cache (brokers as of
// its last refresh), which cannot see a node come back.
func freshMetadata(ctx context.Context, cl *kgo.Client) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: only the brokers
	return req.RequestWith(ctx, cl)
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// switchListener is kfake's listening socket, made to go away and come
// back: down closes the socket and every connection accepted through it,
// so that clients see what a stopped broker does (connections reset, new
// ones refused), and up listens on the same address again. Meanwhile
// Accept waits, so kfake's accept loop survives the outage.
type switchListener struct {
	addr   string // fixed by the first listen
	mu     sync.Mutex
	cond   *sync.Cond
	ln     net.Listener // nil while down
	closed bool
	conns  map[*trackedConn]struct{}
}

// listen is kfake's ListenFn; kfake calls it once per broker, and deps
// runs one broker.
func (l *switchListener) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.ln, l.addr = ln, ln.Addr().String()
	l.mu.Unlock()
	return l, nil
}

func (l *switchListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		for l.ln == nil && !l.closed {
			l.cond.Wait()
		}
		if l.closed {
			l.mu.Unlock()
			return nil, net.ErrClosed
		}
		ln := l.ln
		l.mu.Unlock()

		c, err := ln.Accept()
		l.mu.Lock()
		if l.ln != ln { // down (or Close) closed ln under us
			l.mu.Unlock()
			if c != nil {
				c.Close()
			}
			continue
		}
		if err != nil {
			l.mu.Unlock()
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		return tc, nil
	}
}

func (l *switchListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.cond.Broadcast()
	if l.ln != nil {
		ln := l.ln
		l.ln = nil
		return ln.Close()
	}
	return nil
}

func (l *switchListener) Addr() net.Addr {
	a, _ := net.ResolveTCPAddr("tcp", l.addr)
	return a
}

func (l *switchListener) down() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln == nil {
		return nil
	}
	err := l.ln.Close()
	l.ln = nil
	for c := range l.conns {
		c.Conn.Close()
	}
	clear(l.conns)
	if err != nil {
		return fmt.Errorf("deps: stop kfake: %w", err)
	}
	return nil
}

func (l *switchListener) up() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrKafkaStopped
	}
	if l.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("deps: kfake cannot listen on %s again (another process took the port?): %w", l.addr, err)
	}
	l.ln = ln
	l.cond.Broadcast()
	return nil
}

// trackedConn is a connection switchListener can close on down.
type trackedConn struct {
	net.Conn
	l *switchListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
