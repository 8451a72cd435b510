// Package kafkatopic creates Kafka topics the one way the project needs:
// created, then waited for until the broker's metadata shows them.
//
// A broker answers CreateTopics before its metadata shows the topic (KRaft
// propagates it asynchronously), so a producer or a gateway that asks
// right away is told UNKNOWN_TOPIC_OR_PARTITION for a topic that exists.
package kafkatopic

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// pollEvery is how often Await asks the broker again.
const pollEvery = 50 * time.Millisecond

// Create creates topics with partitions partitions and the broker's
// default replication factor, then waits (Await) until each is visible
// with a leader for every partition.
// A topic that already exists is an error wrapping
// kerr.TopicAlreadyExists; callers that accept it call Await themselves.
func Create(ctx context.Context, adm *kadm.Client, partitions int, topics ...string) error {
	// -1: the broker's default.replication.factor (KIP-464): 1 on a
	// single node, what the operator chose on a cluster.
	rs, err := adm.CreateTopics(ctx, int32(partitions), -1, nil, topics...)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		return fmt.Errorf("create kafka topics %v: %w", topics, err)
	}
	return Await(ctx, adm, topics...)
}

// Await returns once the broker's metadata shows every topic with a
// leader for each partition, or ctx's error naming the first topic that
// is still missing.
func Await(ctx context.Context, adm *kadm.Client, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	for {
		missing := topics[0]
		details, err := adm.ListTopics(ctx, topics...)
		if err == nil {
			missing = ""
			for _, t := range topics {
				if !visible(details[t]) {
					missing = t
					break
				}
			}
			if missing == "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka topic %q created but not in the broker's metadata: %w", missing, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// visible reports whether d describes a topic whose every partition has a
// leader.
func visible(d kadm.TopicDetail) bool {
	if d.Err != nil || len(d.Partitions) == 0 {
		return false
	}
	for _, p := range d.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}
