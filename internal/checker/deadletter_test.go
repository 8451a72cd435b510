package checker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
)

// TestDeadLettersReadFromKafka: the checker counts, in a dead-letter
// topic it reads straight from Kafka, this run's dead letters of its
// groups, each message once (a second dead letter of one is a
// duplicate), with their delivery counts, and skips other runs' and
// other groups'; records written just before it stops are read too.
func TestDeadLettersReadFromKafka(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		topic := newTopic(t, k)
		const run, other = 7, 8
		letter := func(run uint64, group string, stream int, seq int64, count string) *kgo.Record {
			mk, mv := checker.Meta(run, stream, seq)
			return &kgo.Record{Topic: topic, Value: []byte("v"), Headers: []kgo.RecordHeader{
				{Key: mk, Value: mv},
				{Key: databusv1.HeaderOriginalTopic, Value: []byte("orders")},
				{Key: databusv1.HeaderConsumerGroup, Value: []byte(group)},
				{Key: databusv1.HeaderDeliveryCount, Value: []byte(count)},
			}}
		}
		cl, err := k.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		records := []*kgo.Record{
			letter(run, "g0", 0, 0, "3"), letter(run, "g0", 1, 5, "3"), letter(run, "g0", 0, 0, "3"), // a duplicate
			letter(run, "g0", 2, 9, "2"),           // another delivery count
			letter(other, "g0", 0, 1, "3"),         // another run's
			letter(run, "someone-else", 0, 2, "3"), // another group's
			letter(run, "g0", 3, 1, "x"),           // no count
		}
		if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		got, err := checker.ReadDeadLetters(ctx, k.Brokers, topic, run, 4, []string{"g0", "g1"})
		if err != nil {
			t.Fatal(err)
		}
		if got.DeadLettered != 4 || got.Duplicates != 1 || got.Others != 2 || got.Malformed != 1 ||
			got.Counts[3] != 3 || got.Counts[2] != 1 || got.Counts[0] != 1 {
			t.Fatalf("%+v; want 4 dead-lettered, 1 duplicate, 2 others, 1 malformed, counts 3:3 2:1 0:1", got)
		}
	})
}

func TestNackConfigErrors(t *testing.T) {
	b := []string{"127.0.0.1:1"}
	for _, tt := range []struct {
		cfg  checker.Config
		want string
	}{
		{checker.Config{Groups: 1, NackFraction: 1.5}, "--nack-fraction 1.5"},
		{checker.Config{Groups: 1, NackFraction: 0.1, NackDelay: -time.Second}, "--nack-delay"},
		{checker.Config{NackFraction: 0.1}, "give --groups"},
		{checker.Config{Groups: 1, PoisonKeys: 5}, "give --max-deliveries"},
		{checker.Config{Groups: 1, PoisonKeys: 5, MaxDeliveries: 3}, "give --brokers"},
		{checker.Config{Groups: 1, NackFraction: 0.1, MaxDeliveries: 1, Brokers: b}, "--max-deliveries 2 or more"},
		{checker.Config{Groups: 1, MaxDeliveries: 3, Brokers: b, TopicCount: 2, Streams: 2}, "one topic"},
		{checker.Config{Groups: 1, DeadLetterTopic: "orders.dead"}, "give --max-deliveries N too"},
	} {
		tt.cfg.Target = "127.0.0.1:1"
		_, err := checker.Run(context.Background(), tt.cfg, nil)
		if !errors.Is(err, checker.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an ErrConfig saying %q", tt.cfg, err, tt.want)
		}
	}
}

// TestNacksAndDeadLetters runs the nacking members through a gateway:
// a fraction of the messages nacked once come again and are acked,
// poison messages nacked at every delivery end in the dead-letter topic
// at delivery MaxDeliveries, once per group, and nothing is lost.
func TestNacksAndDeadLetters(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		addr := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		const poison, groups, maxDeliveries = 10, 2, 3
		res, err := checker.Run(ctx, checker.Config{
			Target: addr, Topic: newTopic(t, k), Brokers: k.Brokers, Partitions: 4,
			// Batches of 10 at a bounded rate: the poison messages are
			// among the first 1,010 published.
			Scenario: checker.Throughput, Streams: 3, Batch: 10, Inflight: 2, Rate: 3000,
			Warmup: 200 * time.Millisecond, Duration: time.Second, Groups: groups, Members: 2, DrainTimeout: 30 * time.Second,
			NackFraction: 0.05, NackDelay: 50 * time.Millisecond, PoisonKeys: poison, MaxDeliveries: maxDeliveries,
		}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		summary(t, res)
		d := res.Delivery
		if d == nil || d.DeadLetters == nil {
			t.Fatalf("no delivery or dead letters verified: %+v", d)
		}
		f := d.DeadLetters
		switch {
		case res.Acked < 1010:
			t.Fatalf("%d acked: too few for the %d poison messages", res.Acked, poison)
		case !res.OK() || d.Lost != 0:
			t.Fatalf("OK %v: %d lost (first: %v)", res.OK(), d.Lost, d.Sample)
		case f.Poison != poison*groups || f.DeadLettered != f.Poison || f.Wrong != 0 || f.Duplicates != 0:
			t.Fatalf("dead letters %+v: want %d poison, each dead-lettered once, none wrong", f, poison*groups)
		case len(f.DeliveryCounts) != 1 || f.DeliveryCounts["3"] != f.Poison:
			t.Fatalf("dead letters by delivery count %v, want all %d at %d", f.DeliveryCounts, f.Poison, maxDeliveries)
		case d.Nacked <= f.Poison*maxDeliveries || d.Redelivered < d.Nacked-f.Poison:
			// Each poison message is nacked at each delivery; the fraction
			// once more each; every nack but a dead letter's comes again.
			t.Fatalf("%d nacked, %d redelivered: want more than %d nacks, each but the last of a poison message redelivered", d.Nacked, d.Redelivered, f.Poison*maxDeliveries)
		case d.Received < int64(groups)*(d.Acked-f.Poison/groups):
			t.Fatalf("%d received by %d groups, fewer than the %d acked messages that are not poison, each", d.Received, groups, d.Acked-f.Poison/groups)
		}
	})
}
