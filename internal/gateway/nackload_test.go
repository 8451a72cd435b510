package gateway_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// Nacks under load: many retries due while the partition's backlog
// drains, their records fetched again by the member's retry reader while
// its fetch goes on.

// TestBacklogDrainedWithNacks: a backlog of 5,000 messages drained in
// batches of 10 with every tenth nacked once for 1 s: each nacked one
// comes back once, count 2, the rest once, count 1; the commit reaches
// the end.
func TestBacklogDrainedWithNacks(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const total = 5000
		g, topic, group := nackTopic(t, k, gateway.Config{CommitInterval: 100 * time.Millisecond}, total)
		s, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group, gateway.MDBatchSize, "10")
		nacked := func(o int64) bool { return o%10 == 3 }
		l := &nackLog{}
		ended := consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			if nacked(m.Offset) && m.DeliveryCount == 1 {
				return &databusv1.Nack{Partition: m.Partition, Offset: m.Offset, DelayMs: 1000}
			}
			return nil
		})
		waitCommitEnd(t, k, topic, group, total, l, ended)
		lost, dups, wrong := l.tally(total, func(o int64) int {
			if nacked(o) {
				return 2
			}
			return 1
		})
		t.Logf("%d messages, %d nacked once at 1s: lost %d, duplicates %d, wrong delivery counts %d", total, total/10, lost, dups, wrong)
		if lost != 0 || dups != 0 || wrong != 0 {
			t.Errorf("lost %d, duplicates %d, wrong counts %d: want 0, 0, 0", lost, dups, wrong)
		}
	})
}

// TestPoisonMessagesAmongMany: 20 poison messages among 3,000, nacked at
// every delivery at 100 ms with x-databus-max-deliveries 3: each is
// delivered 3 times (counts 1, 2, 3) and dead-lettered once; the rest
// are delivered once; the commit reaches the end.
func TestPoisonMessagesAmongMany(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const total, poisons = 3000, 20
		g, topic, group := nackTopic(t, k, gateway.Config{CommitInterval: 100 * time.Millisecond}, total)
		dlq := topic + databusv1.DeadLetterSuffix
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k.CreateTopics(ctx, 1, dlq); err != nil {
			t.Fatal(err)
		}
		s, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group, gateway.MDBatchSize, "10", databusv1.MDMaxDeliveries, "3")
		poison := func(o int64) bool { return o%(total/poisons) == 7 }
		l := &nackLog{}
		ended := consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			if poison(m.Offset) {
				return &databusv1.Nack{Partition: m.Partition, Offset: m.Offset, DelayMs: 100, Reason: "poison"}
			}
			return nil
		})
		waitCommitEnd(t, k, topic, group, total, l, ended)
		lost, dups, wrong := l.tally(total, func(o int64) int {
			if poison(o) {
				return 3
			}
			return 1
		})
		letters := readTopic(t, k, dlq)
		byOffset := map[string]int{}
		badCount := 0
		for _, dl := range letters {
			for _, h := range dl.Headers {
				switch h.Key {
				case databusv1.HeaderOriginalOffset:
					byOffset[string(h.Value)]++
				case databusv1.HeaderDeliveryCount:
					if string(h.Value) != "3" {
						badCount++
					}
				}
			}
		}
		missing := 0
		for o := int64(0); o < total; o++ {
			if poison(o) && byOffset[strconv.FormatInt(o, 10)] == 0 {
				missing++
			}
		}
		t.Logf("%d messages, %d poison: %d dead letters (%d distinct, %d missing, %d not at count 3); lost %d, duplicates %d, wrong delivery counts %d",
			total, poisons, len(letters), len(byOffset), missing, badCount, lost, dups, wrong)
		if len(letters) != poisons || len(byOffset) != poisons || missing != 0 || badCount != 0 {
			t.Errorf("%d dead letters of %d offsets, %d missing, %d not at count 3: want %d of %d, 0, 0", len(letters), len(byOffset), missing, badCount, poisons, poisons)
		}
		if lost != 0 || dups != 0 || wrong != 0 {
			t.Errorf("lost %d, duplicates %d, wrong counts %d: want 0, 0, 0", lost, dups, wrong)
		}
	})
}

// TestNackedMessageGoneFromKafka: a message nacked for 1 s whose record
// retention removes meanwhile (DeleteRecords past it) cannot come back:
// it is not redelivered, and the commit passes it (the gateway acks it)
// instead of waiting for it forever.
func TestNackedMessageGoneFromKafka(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const total, gone = 20, 5
		g, topic, group := nackTopic(t, k, gateway.Config{CommitInterval: 100 * time.Millisecond}, total)
		s, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
		l := &nackLog{}
		consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			if m.Offset == gone {
				return &databusv1.Nack{Partition: 0, Offset: gone, DelayMs: 1000}
			}
			return nil
		})
		testkit.Eventually(t, time.Minute, "all delivered, the commit at the nacked one", func() bool {
			return l.distinct() == total && committed(t, k, topic, group) == gone
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		del := kadm.Offsets{}
		del.Add(kadm.Offset{Topic: topic, Partition: 0, At: 10})
		if _, err := kadm.NewClient(depstest.Client(t, k)).DeleteRecords(ctx, del); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, time.Minute, "the commit passes the message gone", func() bool { return committed(t, k, topic, group) == total })
		if n := len(l.get(gone)); n != 1 {
			t.Errorf("the message gone delivered %d times, want 1 (it cannot come back)", n)
		}
		lost, dups := total-l.distinct(), l.duplicates(-1)
		t.Logf("lost %d, duplicates %d", lost, dups)
		if lost != 0 || dups != 0 {
			t.Errorf("lost %d, duplicates %d: want 0 and 0", lost, dups)
		}
	})
}

// waitCommitEnd waits until group's commit of topic's one partition
// reaches total, failing the test if the stream ends first.
func waitCommitEnd(t *testing.T, k *deps.Kafka, topic, group string, total int64, l *nackLog, ended <-chan error) {
	t.Helper()
	testkit.EventuallyNil(t, 2*time.Minute, "the commit reaches the end", func() error {
		select {
		case err := <-ended:
			t.Fatalf("stream ended: %v", err)
		default:
		}
		if c := committed(t, k, topic, group); c != total {
			return fmt.Errorf("committed %d; %d of %d offsets seen", c, l.distinct(), total)
		}
		return nil
	})
}

// tally checks offsets 0 to total against want, each one's number of
// deliveries: lost counts those delivered fewer times (a nacked one never
// redelivered too), dups the deliveries past it, wrong the deliveries
// whose count is not their rank (1, 2, ...).
func (l *nackLog) tally(total int64, want func(o int64) int) (lost, dups, wrong int) {
	for o := int64(0); o < total; o++ {
		ds, w := l.get(o), want(o)
		switch {
		case len(ds) < w:
			lost++
		case len(ds) > w:
			dups += len(ds) - w
		}
		for i, d := range ds {
			if i < w && d.count != uint32(i+1) {
				wrong++
			}
		}
	}
	return lost, dups, wrong
}

// TestBacklogOnPartitionsDrainedWithNacks: the backlog test on 4
// partitions, whose retries the retry reader fetches again side by side:
// every nacked message comes back once, count 2, none is taken for gone.
func TestBacklogOnPartitionsDrainedWithNacks(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const total, parts = 4000, 4
		topic := newTopic(t, k, parts)
		g := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		g.publishAll(t, ctx, topic, total)
		group := depstest.Group(t)
		s, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group, gateway.MDBatchSize, "10")
		nacked := func(seq int64) bool { return seq%10 == 3 }
		bySeq := &nackLog{} // by message seq (its key), not offset
		ended := consumeNacking(s, &nackLog{}, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			seq, _ := strconv.ParseInt(string(m.Key), 10, 64)
			bySeq.add(&databusv1.ConsumedMessage{Offset: seq, DeliveryCount: m.DeliveryCount})
			if nacked(seq) && m.DeliveryCount == 1 {
				return &databusv1.Nack{Partition: m.Partition, Offset: m.Offset, DelayMs: 200}
			}
			return nil
		})
		adm := kadm.NewClient(depstest.Client(t, k))
		testkit.EventuallyNil(t, 2*time.Minute, "the commits reach the ends", func() error {
			select {
			case err := <-ended:
				t.Fatalf("stream ended: %v", err)
			default:
			}
			offs, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			sum := int64(0)
			offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
			if sum != total {
				return fmt.Errorf("committed %d in all; %d of %d messages seen", sum, bySeq.distinct(), total)
			}
			return nil
		})
		lost, dups, wrong := bySeq.tally(total, func(seq int64) int {
			if nacked(seq) {
				return 2
			}
			return 1
		})
		t.Logf("%d messages on %d partitions, %d nacked once at 200ms: lost %d, duplicates %d, wrong delivery counts %d", total, parts, total/10, lost, dups, wrong)
		if lost != 0 || dups != 0 || wrong != 0 {
			t.Errorf("lost %d, duplicates %d, wrong counts %d: want 0, 0, 0", lost, dups, wrong)
		}
	})
}
