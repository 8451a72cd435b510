package checker

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/gateway"
)

// The direct consumer (Config.Direct with Consume Only, --direct
// --consume only) is the baseline the gateway's subscribe cost is judged
// against: each member of each group is a franz-go group member of its
// own, straight to Kafka, that joins and fetches as the gateway's member
// does (gateway.GroupConsumerOpts: the cooperative-sticky balancer, the
// same fetch wait and sizes, a new group reading from the start), takes
// at most as many records per poll as a subscriber may hold unacked
// (MaxUnacked, the gateway's default), and hands them, in batches of
// SubBatch (the gateway's default), to the same ack logic as a member
// reading through the gateway (tally, process, acked): received,
// verified, acked. It commits as the gateway does, only as far as acked:
// a batch's records are marked for commit (MarkCommitRecords) once acked,
// and franz-go commits the marked offsets every
// gateway.DefaultCommitInterval, when a rebalance revokes partitions and
// when the member leaves; nothing it did not ack is ever marked. Run as a
// process of its own, its CPU per message is what a service consuming
// Kafka itself would spend.
//
// Rebalances wait while a member works through what it polled
// (BlockRebalanceOnPoll, as the gateway's member), so a batch is never
// marked for a partition already revoked.

// consumesDirect says whether the consumers read straight from Kafka:
// with Direct, only when Consume Only runs no publishers; otherwise Direct
// is the publishers', and the consumers verify through the gateway.
func (c *Config) consumesDirect() bool { return c.Direct && c.Consume == Only }

// startDirect starts every member of every group straight to Kafka.
func (c *consumers) startDirect(ctx context.Context) error {
	ctx, c.cancel = context.WithCancel(ctx)
	for g := range c.cfg.Groups {
		for range c.cfg.Members {
			cl, err := newKafkaClient(c.cfg.Brokers, c.cfg.kafkaOpts, append(gateway.GroupConsumerOpts(gateway.Config{}),
				kgo.ConsumerGroup(c.group(g)),
				kgo.ConsumeTopics(c.cfg.Topics[0]),
				kgo.AutoCommitMarks(),
				kgo.AutoCommitInterval(gateway.DefaultCommitInterval),
				kgo.BlockRebalanceOnPoll(),
			)...)
			if err != nil {
				return fmt.Errorf("checker: group %d: %w", g, err)
			}
			c.kafka = append(c.kafka, cl)
			c.wg.Go(func() { c.directMember(ctx, cl, g) })
		}
	}
	return nil
}

// directMember is a member of group g straight to Kafka: it polls,
// counts and acks each batch of what it polled, and marks the acked
// records for commit, until ctx ends.
func (c *consumers) directMember(ctx context.Context, cl *kgo.Client, g int) {
	batch := cmp.Or(c.cfg.SubBatch, gateway.DefaultBatchSize)
	limit := cmp.Or(c.cfg.MaxUnacked, gateway.DefaultMaxUnacked)
	t := newTally()
	for ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, limit)
		if fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.errs.add("kafka", 1)
			}
		})
		recs := fetches.Records()
		for len(recs) > 0 && c.directBatch(ctx, cl, g, t, recs[:min(batch, len(recs))]) {
			recs = recs[min(batch, len(recs)):]
		}
		cl.AllowRebalance()
	}
}

// directBatch receives, acks and marks for commit one batch of records;
// false when the run ended before the batch was acked (it is not marked,
// so a later member of the group reads it again).
func (c *consumers) directBatch(ctx context.Context, cl *kgo.Client, g int, t *tally, recs []*kgo.Record) bool {
	c.begin(t)
	for _, r := range recs {
		c.tally(t, r.Partition, r.Offset, recordMeta(r))
	}
	if !c.process(ctx) {
		return false
	}
	cl.MarkCommitRecords(recs...)
	c.acked(g, t)
	return true
}

// recordMeta is r's metaHeader's value, nil when it has none.
func recordMeta(r *kgo.Record) []byte {
	for _, h := range r.Headers {
		if h.Key == metaHeader {
			return h.Value
		}
	}
	return nil
}

// closeDirect closes the members' clients: each leaves its group,
// committing what it marked (acked) last.
func (c *consumers) closeDirect() {
	for _, cl := range c.kafka {
		cl.Close()
	}
	c.kafka = nil
}
