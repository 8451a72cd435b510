package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A record that Kafka refuses with a retriable error (NOT_ENOUGH_REPLICAS
// when too few in-sync replicas are left to take a write with acks=all;
// no leader while an election runs) is retried by franz-go until
// ProduceTimeout, and then fails with kgo.ErrRecordTimeout, which names
// no cause: franz-go keeps the last produce error to itself. The gateway
// asks the cluster's metadata why, so that the client reads "1 of 3
// replicas in sync, below min.insync.replicas=2" rather than "timed out".

// replicaCheckTTL is how long one look at a topic's replicas explains
// its timeouts: a failing cluster times out many records at once, and
// they share one look.
const replicaCheckTTL = time.Second

// replicaChecks caches a look at a topic's replicas per topic.
type replicaChecks struct {
	mu     sync.Mutex
	topics map[string]*replicaCheck
}

// replicaCheck is one topic's last look; mu lets one caller ask Kafka
// while the others wait for its answer.
type replicaCheck struct {
	mu     sync.Mutex
	at     time.Time
	detail kadm.TopicDetail
	minISR int // 0: unknown (DescribeConfigs refused or failed)
	err    error
}

// replicaCheckTimeout bounds a look: it runs on franz-go's promise
// goroutine, and with every broker down it can only time out.
const replicaCheckTimeout = 2 * time.Second

// explainTimeout returns why records to partition of topic may have timed
// out as the cluster's metadata shows it now, "" when it shows nothing
// wrong. It asks Kafka at most once per replicaCheckTTL per topic, each
// time bounded by replicaCheckTimeout (or KafkaTimeout when shorter).
func (g *Gateway) explainTimeout(topic string, partition int32) string {
	g.replicas.mu.Lock()
	if g.replicas.topics == nil {
		g.replicas.topics = map[string]*replicaCheck{}
	}
	c := g.replicas.topics[topic]
	if c == nil {
		for t, old := range g.replicas.topics { // bounded: forget stale looks
			if old.mu.TryLock() {
				if time.Since(old.at) > time.Minute {
					delete(g.replicas.topics, t)
				}
				old.mu.Unlock()
			}
		}
		c = &replicaCheck{}
		g.replicas.topics[topic] = c
	}
	g.replicas.mu.Unlock()

	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) > replicaCheckTTL {
		c.detail, c.minISR, c.err = g.lookAtReplicas(topic)
		c.at = time.Now()
	}
	if c.err != nil {
		return fmt.Sprintf("Kafka's metadata could not say why (%v)", c.err)
	}
	return replicaShortfall(c.detail, partition, c.minISR)
}

// lookAtReplicas returns topic's partitions and its min.insync.replicas
// (0 when Kafka does not say).
func (g *Gateway) lookAtReplicas(topic string) (kadm.TopicDetail, int, error) {
	cl, err := g.sharedClient()
	if err != nil {
		return kadm.TopicDetail{}, 0, err
	}
	ctx, cancel := context.WithTimeout(g.ctx, min(g.cfg.KafkaTimeout, replicaCheckTimeout))
	defer cancel()
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = details[topic].Err
	}
	if err != nil {
		return kadm.TopicDetail{}, 0, err
	}
	minISR := 0
	// Describing configs may need an ACL the gateway lacks: the replica
	// counts alone still tell most of the story.
	if rcs, err := adm.DescribeTopicConfigs(ctx, topic); err == nil {
		if rc, err := rcs.On(topic, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" && c.Value != nil {
					minISR, _ = strconv.Atoi(*c.Value)
				}
			}
		}
	}
	return details[topic], minISR, nil
}

// replicaShortfall describes what keeps partition of d from taking a
// write with acks=all (the partition asked for, else the first one short
// of replicas): no leader, or fewer in-sync replicas than minISR (0:
// unknown, then fewer than all). It returns "" when nothing is short.
func replicaShortfall(d kadm.TopicDetail, partition int32, minISR int) string {
	short := func(p kadm.PartitionDetail) bool {
		return p.Leader < 0 || (minISR > 0 && len(p.ISR) < minISR) || (minISR == 0 && len(p.ISR) < len(p.Replicas))
	}
	p, ok := d.Partitions[partition]
	if !ok || !short(p) {
		ok = false
		for _, q := range d.Partitions.Sorted() {
			if short(q) {
				p, ok = q, true
				break
			}
		}
	}
	if !ok {
		return ""
	}
	where := fmt.Sprintf("partition %d of topic %q", p.Partition, d.Topic)
	if p.Leader < 0 {
		return fmt.Sprintf("%s has no leader: the brokers of its in-sync replicas %v are down (replicas %v); it takes writes again once one of them is back", where, p.ISR, p.Replicas)
	}
	if minISR > 0 {
		return fmt.Sprintf("not enough in-sync replicas: %s has %d in sync (brokers %v) of %d, fewer than its min.insync.replicas=%d, so Kafka refuses writes with acks=all (NOT_ENOUGH_REPLICAS) until enough brokers are back; nothing of this record was acknowledged",
			where, len(p.ISR), sorted(p.ISR), len(p.Replicas), minISR)
	}
	return fmt.Sprintf("%s has %d of its %d replicas in sync (brokers %v; down or lagging: %v); with too few in sync Kafka refuses writes with acks=all (NOT_ENOUGH_REPLICAS) until brokers are back",
		where, len(p.ISR), len(p.Replicas), sorted(p.ISR), missing(p.Replicas, p.ISR))
}

func sorted(ids []int32) []int32 { return slices.Sorted(slices.Values(ids)) }

// missing returns the replicas not in isr.
func missing(replicas, isr []int32) []int32 {
	var out []int32
	for _, r := range replicas {
		if !slices.Contains(isr, r) {
			out = append(out, r)
		}
	}
	return sorted(out)
}

// produceFailure is the message of a record Kafka did not store: err,
// and for a timeout what the cluster's replicas say of it.
func (g *Gateway) produceFailure(r *kgo.Record, err error) string {
	msg := err.Error()
	if errors.Is(err, kgo.ErrRecordTimeout) {
		if why := g.explainTimeout(r.Topic, r.Partition); why != "" {
			msg += ": " + why
		}
	}
	return msg
}
