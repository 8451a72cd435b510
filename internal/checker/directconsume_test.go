package checker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
)

// fillDirect fills a fresh topic straight to Kafka and returns it with
// the records Kafka acked.
func fillDirect(t *testing.T, ctx context.Context, k *deps.Kafka) (string, int64) {
	t.Helper()
	topic := newTopic(t, k)
	fill, err := checker.Run(ctx, checker.Config{
		Direct: true, Brokers: k.Brokers, Topic: topic, Scenario: checker.Throughput,
		Streams: 2, Batch: 50, Inflight: 2, Warmup: -1, Duration: 300 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fill.Acked == 0 || fill.Failed != 0 {
		t.Fatalf("filling the topic: %d acked, %d failed", fill.Acked, fill.Failed)
	}
	return topic, fill.Acked
}

// committed returns what group committed on topic, summed over its
// partitions, and the topic's end offsets summed.
func committed(t *testing.T, ctx context.Context, k *deps.Kafka, group, topic string) (sum, ends int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At > 0 {
			sum += o.At
		}
	})
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	lo.Each(func(o kadm.ListedOffset) { ends += o.Offset })
	return sum, ends
}

// TestDirectConsumeDrains drains a filled topic with --direct --consume
// only, against kfake and the real broker: every record arrives, the
// consumers' CPU is measured, and what they acked (everything) is
// committed when they leave.
func TestDirectConsumeDrains(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		topic, filled := fillDirect(t, ctx, k)
		var windows int
		res, err := checker.Run(ctx, checker.Config{
			Direct: true, Brokers: k.Brokers, Topic: topic, Consume: checker.Only,
			Groups: 1, Members: 2, DrainTimeout: 30 * time.Second,
			OnWindow: func(bool) { windows++ },
		}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		out := summary(t, res)
		d := res.Delivery
		switch {
		case d == nil:
			t.Fatal("no delivery figures")
		case !res.Direct || !strings.Contains(out, "straight from Kafka") || res.Target != strings.Join(k.Brokers, ","):
			t.Errorf("direct %v, target %q: the result must say it read straight from %v", res.Direct, res.Target, k.Brokers)
		case d.Acked != filled || d.Lost != 0 || d.Received < filled || !res.OK():
			t.Errorf("delivery %+v of %d filled: want every record received", d, filled)
		case res.ConsumeCPUS <= 0 || !strings.Contains(out, "µs per received message"):
			t.Errorf("consumers' CPU %.3f s: want it measured and said", res.ConsumeCPUS)
		case d.Cycles < filled/100:
			t.Errorf("%d get-ack cycles for %d records: want batches of at most 100", d.Cycles, filled)
		case windows != 2:
			t.Errorf("OnWindow called %d times, want open and close", windows)
		}
		if sum, ends := committed(t, ctx, k, d.PerGroup[0].Group, topic); sum != ends {
			t.Errorf("the group committed %d offsets of the topic's %d: every acked record must be committed once the members leave", sum, ends)
		}
	})
}

// TestDirectConsumeCommitsOnlyAcked stops direct consumers that take
// 200 ms over each batch before the topic is drained: the batch in hand
// and the rest of its poll were never acked, and the group's commits
// must cover exactly what was acked, no record beyond it.
func TestDirectConsumeCommitsOnlyAcked(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic, filled := fillDirect(t, ctx, k)
	res, err := checker.Run(ctx, checker.Config{
		Direct: true, Brokers: k.Brokers, Topic: topic, Consume: checker.Only,
		Groups: 1, Members: 1, SubBatch: 50, ProcessDelay: 200 * time.Millisecond,
		DrainTimeout: 300 * time.Millisecond,
	}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	summary(t, res)
	d := res.Delivery
	if d.Received == 0 || d.Received >= filled {
		t.Fatalf("%d of %d records received: the run must end with some acked and some not (fill more, or slow the members)", d.Received, filled)
	}
	sum, _ := committed(t, ctx, k, d.PerGroup[0].Group, topic)
	if sum != d.Received {
		t.Errorf("the group committed %d offsets, its member acked %d records (one member, no duplicates): a commit beyond the acks loses records, one short of them redelivers what was processed", sum, d.Received)
	}
}
