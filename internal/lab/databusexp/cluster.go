package databusexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
)

// What a production cluster does to the gateway, as fault rows on a
// cluster of three brokers and a KRaft controller (replication 3,
// min.insync.replicas 2, no unclean leader election) that the rows
// start with --kafka real, beside the single broker the other rows use:
// the broker leading a partition crashes (SIGKILL) while publishers
// await answers, or while a group drains; a broker crashes and comes
// back three times in a row; two brokers of three crash, and Kafka
// refuses writes it cannot replicate twice. Each row counts the
// acknowledged messages a group never received, which must be 0. The
// cluster's controller notices a crashed broker after 3 s (Kafka's
// default is 9 s): the failover the rows see is that much shorter than
// a default cluster's.

// clusterFault reports whether the cluster rows run with o: on the
// real Kafka the lab starts.
func clusterFault(o lab.Options) bool {
	return o.Kafka == lab.KafkaReal && len(o.External.KafkaBrokers) == 0
}

// The two brokers of three the two-down row crashes stay down this long.
const twoDownFor = 10 * time.Second

// clusterFaults runs the cluster rows, each on a fresh gateway and
// topic, the cluster healed (every broker up, every replica in sync)
// between rows.
func (b *bench) clusterFaults(ctx context.Context) error {
	if !clusterFault(b.run.Opts) {
		return nil
	}
	k, err := b.run.StartKafkaCluster(ctx, partitions)
	if err != nil {
		return err
	}
	defer k.Stop() // its topics go with it
	b.run.SetEnv("kafka cluster", k.Kind+" (the cluster fault rows)")
	c := k.Cluster()
	for i, f := range clusterRows(c) {
		topic := k.Topic(fmt.Sprintf("lab-databus-cluster-%d-%d", time.Now().Unix(), i+1))
		row, err := b.faultRow(ctx, k, topic, f)
		if err != nil {
			return fmt.Errorf("%s: %w", b.run.Label(f.key), err)
		}
		row.AddNote("the cluster's controller notices a crashed broker after 3 s (broker.session.timeout.ms; Kafka's default is 9 s); p99 is the publish latency over the row's window, which holds the failover")
		b.run.AddRow(row)
		if err := heal(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// heal starts every broker a row left down and waits until every
// replica is in sync.
func heal(ctx context.Context, c *deps.Kafka) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.StartBroker(ctx); err != nil {
		return err
	}
	return c.AwaitInSync(ctx)
}

// clusterRows are the rows on cluster c.
func clusterRows(c *deps.Kafka) []faultRow {
	// The partition whose leader the rows crash: the checker spreads its
	// messages over every partition, and each broker leads some.
	const partition = 0
	killLeader := func(ctx context.Context, topic string) (int32, error) {
		id, err := c.Leader(ctx, topic, partition)
		if err != nil {
			return 0, err
		}
		return id, c.KillNode(id)
	}
	pub := checker.Config{Scenario: checker.Latency, Streams: pubClients, Warmup: -1, Duration: 8 * time.Second,
		Groups: 1, Members: 2, Consume: checker.After, DrainTimeout: 90 * time.Second}
	return []faultRow{{
		key: faultLeaderPublish, what: "the broker leading partition 0 SIGKILLed while publishers await answers, and left down",
		inject: func(ctx context.Context, _ *lab.Gateway, topic string) error {
			_, err := killLeader(ctx, topic)
			return err
		},
		cfg: with(pub, func(c *checker.Config) { c.KillEvery, c.MaxFaults = 3*time.Second, 1 }),
	}, {
		// Throughput-optimized publishers fill the topic for 1 s (some
		// 50,000 messages), so that the drain (batches of 10 taking 5 ms
		// each) outlasts the kill 1 s into it and the failover:
		// latency-optimized ones write too little on a replicated
		// cluster.
		key: faultLeaderSubscribe, what: "the broker leading partition 0 SIGKILLed while members receive and ack, and left down",
		inject: func(ctx context.Context, _ *lab.Gateway, topic string) error {
			_, err := killLeader(ctx, topic)
			return err
		},
		cfg: with(pub, func(c *checker.Config) {
			c.Scenario, c.Duration, c.FaultPhase = checker.Throughput, time.Second, checker.ConsumePhase
			c.SubBatch, c.ProcessDelay, c.KillEvery, c.MaxFaults = 10, 5*time.Millisecond, time.Second, 1
		}),
	}, {
		key: faultKillRestart, what: "the broker leading partition 0 SIGKILLed, started again once another led, and caught up, three times in a row",
		inject: func(ctx context.Context, _ *lab.Gateway, topic string) error {
			id, err := killLeader(ctx, topic)
			if err != nil {
				return err
			}
			for {
				now, err := c.Leader(ctx, topic, partition)
				if err == nil && now != id {
					break
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
			return heal(ctx, c)
		},
		// A cycle takes 7-15 s on 2 busy cores: every crash falls
		// while publishers run.
		cfg: with(pub, func(c *checker.Config) {
			c.Duration, c.KillEvery, c.MaxFaults = 50*time.Second, 15*time.Second, 3
			c.DrainTimeout = 3 * time.Minute
		}),
	}, {
		key: faultTwoDown, what: fmt.Sprintf("brokers 1 and 2 of 3 SIGKILLed for %v: one in-sync replica left, below min.insync.replicas=2, so Kafka refuses writes (NOT_ENOUGH_REPLICAS) until they are back", twoDownFor),
		inject: func(ctx context.Context, _ *lab.Gateway, _ string) error {
			for _, id := range c.Nodes()[:2] {
				if err := c.KillNode(id); err != nil {
					return err
				}
			}
			select {
			case <-time.After(twoDownFor):
			case <-ctx.Done():
			}
			return heal(context.WithoutCancel(ctx), c)
		},
		cfg: with(pub, func(c *checker.Config) {
			c.Duration, c.KillEvery, c.MaxFaults = 20*time.Second, 4*time.Second, 1
			c.DrainTimeout = 3 * time.Minute
		}),
	}}
}
