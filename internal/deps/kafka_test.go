package deps_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

// produce writes records with values first..last-1 (keyed by the same
// number, so they spread over the partitions), acks=all and idempotent.
func produce(t *testing.T, cl *kgo.Client, topic string, first, last int) {
	t.Helper()
	rs := make([]*kgo.Record, 0, last-first)
	for i := first; i < last; i++ {
		v := []byte(strconv.Itoa(i))
		rs = append(rs, &kgo.Record{Topic: topic, Key: v, Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce %d..%d: %v", first, last-1, err)
	}
}

func producer(t *testing.T, k *deps.Kafka) *kgo.Client {
	// Both are franz-go's defaults; said here because the test is about them.
	return depstest.Client(t, k, kgo.RequiredAcks(kgo.AllISRAcks()))
}

// consumeUntil polls cl, at most 100 records per poll, until it has seen
// at least n records or ctx ends; it returns the values seen, failing on a
// duplicate.
func consumeUntil(ctx context.Context, t *testing.T, cl *kgo.Client, n int, seen map[int]bool) (got []int) {
	t.Helper()
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			v, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("record value %q", r.Value)
			}
			if seen[v] {
				t.Errorf("record %d consumed twice (partition %d, offset %d)", v, r.Partition, r.Offset)
			}
			seen[v] = true
			got = append(got, v)
		})
	}
	return got
}

// TestKafkaGroupResumesAfterCommit produces 1000 records, has one member
// of a consumer group read and commit part of them and leave, and checks
// that the next member of the group resumes exactly after the commit.
func TestKafkaGroupResumesAfterCommit(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := depstest.Topic(t, k, 4)
		group := depstest.Group(t)
		start := time.Now()
		produce(t, producer(t, k), topic, 0, 1000)
		t.Logf("produced 1000 records in %s", time.Since(start).Round(time.Millisecond))

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		opts := []kgo.Opt{
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(200 * time.Millisecond),
		}
		seen := map[int]bool{}

		first, err := k.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		got1 := consumeUntil(ctx, t, first, 400, seen)
		// Everything polled so far is processed: commit it, and only it.
		if err := first.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		first.Close() // leaves the group without committing more
		t.Logf("first member consumed and committed %d records in %s", len(got1), time.Since(start).Round(time.Millisecond))
		if len(got1) < 400 || len(got1) >= 1000 {
			t.Fatalf("first member consumed %d records, want 400..999 (at most 100 per poll)", len(got1))
		}

		second := depstest.Client(t, k, opts...)
		start = time.Now()
		got2 := consumeUntil(ctx, t, second, 1000-len(got1), seen)
		t.Logf("second member consumed %d records in %s", len(got2), time.Since(start).Round(time.Millisecond))
		if len(got1)+len(got2) != 1000 || len(seen) != 1000 {
			t.Fatalf("consumed %d + %d records (%d distinct), want 1000 in all: the second member did not resume after the commit", len(got1), len(got2), len(seen))
		}
	})
}

// TestKafkaUnknownTopic checks that neither kind creates a topic on first
// use, even for a client that asks for it: the gateway relies on the error.
func TestKafkaUnknownTopic(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		cl := depstest.Client(t, k, kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: depstest.Name(t), Value: []byte("x")}).FirstErr()
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("produce to a missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		}
	})
}

// TestKafkaBrokerRestart takes the broker down between two batches of
// records and checks that the same client produces again once it is back
// and that nothing written before was lost.
func TestKafkaBrokerRestart(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := depstest.Topic(t, k, 2)
		// franz-go refreshes metadata at most every 5 s by default, which
		// would be most of this test's time after the restart.
		cl := depstest.Client(t, k, kgo.MetadataMinAge(250*time.Millisecond))
		produce(t, cl, topic, 0, 100)

		depstest.StopBroker(t, k)
		if k.Proc() != nil {
			t.Error("Proc() of a stopped broker is not nil")
		}
		// A record's context does not bound how long franz-go takes to fail
		// it (that happens at its next retry, seconds later, or never for an
		// idempotent batch it may have written on a dropped connection), so
		// the test waits for the promise itself.
		acked := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("-1")}, func(_ *kgo.Record, err error) { acked <- err })
		select {
		case err := <-acked:
			if err == nil {
				t.Fatal("produced to a stopped broker")
			}
			t.Logf("produce while down: %v", err)
		case <-time.After(2 * time.Second):
			t.Log("produce while down: not acknowledged within 2 s")
		}
		cancel()

		depstest.StartBroker(t, k)
		if !k.Embedded && k.Proc() == nil {
			t.Error("Proc() of a running real broker is nil")
		}
		start := time.Now()
		produce(t, cl, topic, 100, 200)
		t.Logf("the same client produced again %s after the broker answered", time.Since(start).Round(time.Millisecond))

		cons := depstest.Client(t, k, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		seen := map[int]bool{}
		allSeen := func() bool {
			for i := range 200 {
				if !seen[i] {
					return false
				}
			}
			return true
		}
		for !allSeen() && ctx.Err() == nil {
			consumeUntil(ctx, t, cons, 1, seen)
		}
		if !allSeen() {
			t.Fatalf("records missing after the restart: %d seen, want 0..199", len(seen))
		}
		if seen[-1] {
			t.Log("the record produced while down was written once the broker was back (its batch was retried)")
		}
	})
}
