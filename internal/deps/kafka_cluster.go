package deps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A real Kafka of several nodes (KafkaConfig.Nodes) is a cluster whose
// nodes crash one at a time: what a production cluster does to the
// clients in front of it (a partition's leader moves, its in-sync replica
// set shrinks and grows back). Nodes are named by their node.id, 1..n, as
// Kafka's metadata names them (kadm's BrokerDetail.NodeID, a partition's
// Leader and ISR).

// ErrNotCluster is returned by the per-node methods of a Kafka that is
// not a real one (kfake has no processes to kill).
var ErrNotCluster = errors.New("deps: per-node faults need the real kafka (kfake runs in one process)")

// Nodes returns the node ids of the real Kafka, 1..n; none for kfake.
func (k *Kafka) Nodes() []int32 {
	ids := make([]int32, len(k.nodes))
	for i, r := range k.nodes {
		ids[i] = int32(r.id)
	}
	return ids
}

// node returns node id.
func (k *Kafka) node(id int32) (*realBroker, error) {
	if len(k.nodes) == 0 {
		return nil, ErrNotCluster
	}
	if id < 1 || int(id) > len(k.nodes) {
		return nil, fmt.Errorf("deps: kafka has no node %d: its nodes are 1..%d", id, len(k.nodes))
	}
	return k.nodes[id-1], nil
}

// KillNode SIGKILLs node id's JVM, as a crash would (no controlled
// shutdown: its partitions' leadership moves only once the controller
// notices it gone, after broker.session.timeout.ms, 9 s), until
// StartNode. Killing a node that is down does nothing.
func (k *Kafka) KillNode(id int32) error {
	r, err := k.node(id)
	if err != nil {
		return err
	}
	return r.killServer()
}

// StartNode starts node id again, on its data and addresses, and returns
// once the cluster lists it as a broker again (it may still be catching
// up on its replicas: AwaitInSync waits for that). ctx bounds the wait.
// Starting a running node does nothing.
func (k *Kafka) StartNode(ctx context.Context, id int32) error {
	r, err := k.node(id)
	if err != nil {
		return err
	}
	return r.startServer(ctx)
}

// NodeAddr returns node id's client address, host:port.
func (k *Kafka) NodeAddr(id int32) (string, error) {
	r, err := k.node(id)
	if err != nil {
		return "", err
	}
	return r.brokers[0], nil
}

// PartitionState is what the cluster's metadata says of a partition.
type PartitionState struct {
	Leader   int32   // -1: none
	Replicas []int32 // node ids
	ISR      []int32 // the replicas in sync
}

// Partition returns partition of topic as the cluster's metadata says
// now (the broker asked may lag the controller by a moment).
func (k *Kafka) Partition(ctx context.Context, topic string, partition int32) (PartitionState, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ts, err := k.partitionsNow(ctx, topic)
	if err != nil {
		return PartitionState{}, err
	}
	for _, p := range ts[0].Partitions {
		if p.Partition == partition {
			return PartitionState{Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR}, nil
		}
	}
	return PartitionState{}, fmt.Errorf("deps: topic %s has no partition %d (it has %d)", topic, partition, len(ts[0].Partitions))
}

// Leader returns the node id that leads partition of topic now. A
// partition without a leader (every in-sync replica down) is an error.
func (k *Kafka) Leader(ctx context.Context, topic string, partition int32) (int32, error) {
	p, err := k.Partition(ctx, topic, partition)
	if err == nil && p.Leader < 0 {
		err = fmt.Errorf("deps: partition %s/%d has no leader (replicas %v, in sync %v)", topic, partition, p.Replicas, p.ISR)
	}
	return p.Leader, err
}

// AwaitInSync returns once every partition of topics (none: of every
// topic, the internal ones included) has a leader and all its replicas
// in sync: after StartNode, once the node has caught up, so that the
// cluster takes the next crash as a healthy one. ctx bounds the wait; its
// end is an error naming a partition still short.
func (k *Kafka) AwaitInSync(ctx context.Context, topics ...string) error {
	for {
		short := ""
		ts, err := k.partitionsNow(ctx, topics...)
		if err != nil {
			short = err.Error()
		}
		for _, t := range ts {
			for _, p := range t.Partitions {
				if short == "" && (p.Leader < 0 || len(p.ISR) < len(p.Replicas)) {
					short = fmt.Sprintf("partition %s/%d: leader %d, replicas %v, in sync %v", *t.Topic, p.Partition, p.Leader, p.Replicas, p.ISR)
				}
			}
		}
		if short == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deps: kafka replicas not back in sync: %s: %w", short, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// partitionsNow returns what the metadata says now of topics (none:
// every topic).
func (k *Kafka) partitionsNow(ctx context.Context, topics ...string) ([]kmsg.MetadataResponseTopic, error) {
	cl, err := k.NewClient(kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest() // nil Topics: every topic
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	m, err := req.RequestWith(ctx, cl)
	if err == nil && len(topics) > 0 && len(m.Topics) != len(topics) {
		err = fmt.Errorf("%d topics in the answer, %d asked for", len(m.Topics), len(topics))
	}
	if err == nil {
		for _, t := range m.Topics {
			if err = kerr.ErrorForCode(t.ErrorCode); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("deps: metadata of %v: %w", topics, err)
	}
	return m.Topics, nil
}
