package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/kafkatopic"
	"github.com/highload-lab/hlab/internal/services/kafkafake"
)

// Kafka is the Kafka an experiment runs against, of the kind Options.Kafka
// asked for: the one place the lab makes that choice.
type Kafka struct {
	// Kind describes what runs, for the run's environment ("kafka").
	Kind    string
	Brokers []string
	// Security is how clients connect to Brokers (External.KafkaSecurity:
	// TLS, SASL); the zero value is plaintext. Its fields are file paths,
	// which the lab passes on to the gateways and checkers it starts.
	Security kafkasec.Config
	// opts are Security's franz-go options, for the lab's own clients.
	opts []kgo.Opt
	// JVM is set for the real broker: measurements through it warm up
	// until throughput stops climbing (Measurement.Steady).
	JVM  bool
	stop func()
	real *deps.Kafka // the real broker, which can be taken down (Outage)
	// fake is kfake's process when it keeps its log on disk
	// (StartRestartableKafka), which Outage can kill and start again.
	fake *Service
	// prefix starts the names Topic gives: unique to the run, so that
	// runs on one external cluster do not collide, and found again when
	// the experiment ends to delete its topics and groups.
	prefix string
}

// Topic returns a topic name of the run's own for name; consumer groups
// named after it are the run's too. On an external cluster the lab
// deletes every topic and group so named once the experiment ends.
func (k *Kafka) Topic(name string) string { return k.prefix + name }

// StartKafka starts the Kafka that Opts.Kafka asks for, unconstrained:
// kfake (the embedded default) as a process of its own, "hlab serve kfake",
// so that it shares neither the lab's heap and garbage collector nor its
// CPU figures; or with "real" a single-node KRaft broker from
// internal/deps; or, when Opts.External names brokers, those (the lab
// does not start, stop or take them down; the run's topics and groups,
// named by Topic, are deleted once the experiment ends). partitions is
// the partition count of topics created without one. The caller stops
// it.
func (r *Run) StartKafka(ctx context.Context, partitions int) (*Kafka, error) {
	return r.startKafka(ctx, partitions, false)
}

// StartKafkaCluster starts a real Kafka of deps.ClusterNodes brokers and
// a KRaft controller of their own (replication 3, min.insync.replicas 2),
// unconstrained, for fault rows whose brokers crash one at a time
// (Kafka.Cluster). It needs the real broker's Java and jars, as
// --kafka real does; external brokers are not the lab's to crash. The
// caller stops it.
func (r *Run) StartKafkaCluster(ctx context.Context, partitions int) (*Kafka, error) {
	if len(r.Opts.External.KafkaBrokers) > 0 {
		return nil, fmt.Errorf("lab: a Kafka cluster to crash brokers of needs one the lab starts: %s", ExternalReason)
	}
	r.Progress.Logf("starting a real Kafka cluster (%d brokers and a KRaft controller, on the JVM)", deps.ClusterNodes)
	k, err := deps.StartKafka(ctx, r.Sandbox, deps.KafkaConfig{Kind: deps.KafkaReal, Nodes: deps.ClusterNodes, Partitions: partitions})
	if err != nil {
		return nil, err
	}
	return &Kafka{Kind: k.Kind + ", unconstrained", Brokers: k.Brokers, JVM: true, stop: func() { k.Stop() }, real: k, prefix: r.prefix}, nil
}

// Cluster returns the cluster under k, whose brokers fault rows crash
// one at a time (deps.Kafka.KillNode, Leader, AwaitInSync), or nil when
// k is not one (StartKafkaCluster).
func (k *Kafka) Cluster() *deps.Kafka {
	if k.real == nil || len(k.real.Nodes()) < 2 {
		return nil
	}
	return k.real
}

// StartRestartableKafka is StartKafka for fault rows, whose broker goes
// down and comes back (Kafka.Outage): kfake keeps its log in a directory
// of the run's (hlab serve kfake --data-dir), written through the page
// cache as a real broker's is, so that its process can be SIGKILLed and
// started again with every record it acknowledged and every committed
// offset. The real broker is one already. External brokers are not the
// lab's to take down: it refuses them.
func (r *Run) StartRestartableKafka(ctx context.Context, partitions int) (*Kafka, error) {
	if len(r.Opts.External.KafkaBrokers) > 0 {
		return nil, fmt.Errorf("lab: a Kafka to take down needs one the lab starts: %s", ExternalReason)
	}
	return r.startKafka(ctx, partitions, true)
}

func (r *Run) startKafka(ctx context.Context, partitions int, restartable bool) (*Kafka, error) {
	if brokers := r.Opts.External.KafkaBrokers; len(brokers) > 0 {
		sec := r.Opts.External.KafkaSecurity
		opts, err := sec.Opts()
		if err != nil {
			return nil, err
		}
		version, n, err := deps.ExternalKafka(ctx, brokers, opts...)
		if err != nil {
			return nil, err
		}
		kind := fmt.Sprintf("external brokers %s (%s, %d in the cluster), %s", strings.Join(brokers, ","), version, n, deps.ExternalQuotas)
		if sec.Enabled() {
			kind += ", " + sec.Describe()
		}
		r.Progress.Logf("using the external kafka %s", kind)
		prefix := r.prefix
		r.external(DepKafka, kind, func() error { return deps.CleanupKafka(brokers, prefix, opts...) })
		// A real broker, most likely on the JVM: measurements warm up
		// until throughput stops climbing.
		return &Kafka{Kind: kind, Brokers: brokers, Security: sec, opts: opts, JVM: true, prefix: prefix}, nil
	}
	kind, err := deps.ParseKafkaKind(r.Opts.Kafka)
	if err != nil {
		return nil, err
	}
	defaults.Positive(&partitions, deps.DefaultKafkaPartitions)
	if kind == deps.KafkaReal {
		r.Progress.Logf("starting a real Kafka broker (KRaft, on the JVM)")
		k, err := deps.StartKafka(ctx, r.Sandbox, deps.KafkaConfig{Kind: deps.KafkaReal, Partitions: partitions})
		if err != nil {
			return nil, err
		}
		return &Kafka{Kind: k.Kind + " (a single KRaft node, unconstrained)", Brokers: k.Brokers, JVM: true, stop: func() { k.Stop() }, real: k, prefix: r.prefix}, nil
	}
	cfg := kafkafake.Config{Partitions: partitions}
	desc := "kfake (embedded default, in memory; its own process: hlab serve kfake, unconstrained)"
	if restartable {
		r.seq++
		cfg.DataDir = filepath.Join(r.dir, fmt.Sprintf("kfake-data-%d", r.seq))
		desc = "kfake (embedded default, its log on disk through the page cache; its own process: hlab serve kfake, unconstrained)"
	}
	svc, err := r.StartServicePorts(ctx, "kfake", 0, 0, []string{"--kafka-addr"}, cfg.Args()...)
	if err != nil {
		return nil, err
	}
	k := &Kafka{Kind: desc, Brokers: []string{svc.Ports["--kafka-addr"]}, stop: func() { svc.Stop() }, prefix: r.prefix}
	if restartable {
		k.fake = svc
	}
	return k, nil
}

// Outage takes the broker down for d, then brings it back on the same
// addresses, also when ctx is cancelled meanwhile, and waits until it
// answers. The real broker is SIGKILLed, as a crash would, and recovers
// its log (deps.Kafka.Outage); kfake started by StartRestartableKafka is
// SIGKILLed too, and comes back from its log. kfake in
// memory keeps its records in its process, and external brokers are not
// the lab's: Outage refuses both.
func (k *Kafka) Outage(ctx context.Context, d time.Duration) error {
	switch {
	case k.real != nil:
		return k.real.Outage(ctx, d)
	case k.fake != nil:
		if err := k.fake.Kill(); err != nil {
			return fmt.Errorf("lab: kill kfake: %w", err)
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		// Back even when ctx was cancelled meanwhile: others use the
		// broker. The process lives as long as the context it starts with:
		// not one that ends here (Stop ends it; Restart bounds its wait).
		if err := k.fake.Restart(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("lab: kfake did not come back from its log: %w", err)
		}
		return nil
	}
	return fmt.Errorf("lab: a Kafka outage needs a broker the lab can take down and bring back (--kafka real, or StartRestartableKafka): kfake in memory keeps its records in its process, and %s", ExternalReason)
}

// CanGoDown reports whether Outage can take k down and bring it back:
// the real broker the lab starts, or kfake from StartRestartableKafka.
func (k *Kafka) CanGoDown() bool { return k.real != nil || k.fake != nil }

// Stop stops the broker; external brokers go on running (the lab deletes
// the run's topics there once the experiment ends).
func (k *Kafka) Stop() {
	if k != nil && k.stop != nil {
		k.stop()
	}
}

// NewClient makes a franz-go client of the lab's Kafka: its brokers and
// security, then opts. The caller closes it.
func (k *Kafka) NewClient(opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.DialTimeout(3 * time.Second)}, k.opts...), opts...)...)
	if err != nil {
		return nil, fmt.Errorf("lab: kafka client: %w", err)
	}
	return cl, nil
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

// CreateTopic creates topic with partitions partitions and the
// brokers' default replication factor.
func (k *Kafka) CreateTopic(ctx context.Context, topic string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return k.admin(func(adm *kadm.Client) error {
		if err := kafkatopic.Create(ctx, adm, partitions, topic); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		return nil
	})
}

// DeleteTopic drops a topic the experiment no longer needs; errors are
// ignored (kfake keeps records in memory: this only frees it).
func (k *Kafka) DeleteTopic(ctx context.Context, topic string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	k.admin(func(adm *kadm.Client) error {
		_, err := adm.DeleteTopics(ctx, topic)
		return err
	})
}

// GroupLag returns how many records of its topics group has not
// committed yet (end offsets minus committed offsets, summed over
// partitions), as Kafka sees it.
func (k *Kafka) GroupLag(ctx context.Context, group string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var lag int64
	err := k.admin(func(adm *kadm.Client) error {
		ls, err := adm.Lag(ctx, group)
		if err != nil {
			return err
		}
		l, ok := ls[group]
		if !ok {
			return fmt.Errorf("lab: kafka said nothing of group %s", group)
		}
		if err := l.Error(); err != nil {
			return err
		}
		lag = l.Lag.Total()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("lab: lag of group %s: %w", group, err)
	}
	return lag, nil
}
