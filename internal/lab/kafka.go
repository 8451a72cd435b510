package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/kafkatopic"
	"github.com/highload-lab/hlab/internal/services/kafkafake"
)

// Kafka is the Kafka an experiment runs against, of the kind Options.Kafka
// asked for: the one place the lab makes that choice.
type Kafka struct {
	// Kind describes what runs, for the run's environment ("kafka").
	Kind    string
	Brokers []string
	// JVM is set for the real broker: measurements through it warm up
	// until throughput stops climbing (Measurement.Steady).
	JVM  bool
	stop func()
	real *deps.Kafka // the real broker, which can be taken down (Outage)
}

// StartKafka starts the Kafka that Opts.Kafka asks for, unconstrained:
// kfake (the embedded default) as a process of its own, "hlab serve kfake",
// so that it shares neither the lab's heap and garbage collector nor its
// CPU figures; or with "real" a single-node KRaft broker from
// internal/deps. partitions is the partition count of topics created
// without one. The caller stops it.
func (r *Run) StartKafka(ctx context.Context, partitions int) (*Kafka, error) {
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
		return &Kafka{Kind: k.Kind + " (a single KRaft node, unconstrained)", Brokers: k.Brokers, JVM: true, stop: func() { k.Stop() }, real: k}, nil
	}
	svc, err := r.StartServicePorts(ctx, "kfake", 0, 0, []string{"--kafka-addr"}, kafkafake.Config{Partitions: partitions}.Args()...)
	if err != nil {
		return nil, err
	}
	return &Kafka{Kind: "kfake (embedded default, in memory; its own process: hlab serve kfake, unconstrained)",
		Brokers: []string{svc.Ports["--kafka-addr"]}, stop: func() { svc.Stop() }}, nil
}

// Outage takes the real broker down (SIGTERM, as a broker restart does)
// for d, then brings it back on the same addresses, also when ctx is
// cancelled meanwhile, and waits until it answers (deps.Kafka.Outage).
// kfake's records live in its process: it cannot go down and come back,
// so Outage refuses it.
func (k *Kafka) Outage(ctx context.Context, d time.Duration) error {
	if k.real == nil {
		return fmt.Errorf("lab: a Kafka outage needs the real broker (--kafka real): kfake keeps its records in its process")
	}
	return k.real.Outage(ctx, d)
}

// Stop stops the broker.
func (k *Kafka) Stop() {
	if k != nil && k.stop != nil {
		k.stop()
	}
}

// admin runs fn with an admin client that lives for the call.
func (k *Kafka) admin(fn func(*kadm.Client) error) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return fmt.Errorf("lab: kafka client: %w", err)
	}
	defer cl.Close()
	return fn(kadm.NewClient(cl))
}

// CreateTopic creates topic with partitions partitions (replication 1).
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
