package eventlog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/services/eventlog"
	"github.com/highload-lab/hlab/internal/services/eventlog/eventlogtest"
	"github.com/highload-lab/hlab/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

// produce writes events with ids prefix-0.. and returns the ids.
func produce(t testing.TB, cl *kgo.Client, topic, prefix string, n int) []string {
	t.Helper()
	var ids []string
	var recs []*kgo.Record
	for i := range n {
		ev := eventlog.Event{ID: fmt.Sprintf("%s-%d", prefix, i), Time: time.Now(), Body: "body"}
		b, _ := json.Marshal(ev)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(ev.ID), Value: b})
		ids = append(ids, ev.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return ids
}

// TestConsumer checks, against kfake and the real broker, that every
// event is processed once, a redelivered id is counted as a duplicate, a
// record that is not an event is skipped and counted, the group's commits
// reach the end of the topic, and the lag gauge returns to 0.
func TestConsumer(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := depstest.Topic(t, k, 1)
		group := depstest.Group(t)
		cl := depstest.Client(t, k)

		ids := produce(t, cl, topic, "a", 50)
		dup := produce(t, cl, topic, "a", 1) // a-0 again: a redelivery as the consumer sees it
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("not json")}).FirstErr(); err != nil {
			t.Fatal(err)
		}

		tr := eventlogtest.NewTracker()
		r := eventlogtest.Start(t, eventlog.ConsumerConfig{Brokers: k.Brokers, Topic: topic, Group: group, Processed: tr.Add, MaxPollRecords: 7})
		testkit.Eventually(t, 30*time.Second, "every event processed", func() bool { return tr.Has(ids) })
		testkit.Eventually(t, 10*time.Second, "the duplicate and the malformed record counted", func() bool {
			return testkit.MetricSum(t, r.Reg, "eventlog_consumer_duplicates_total", nil) == 1 && testkit.MetricSum(t, r.Reg, "eventlog_consumer_malformed_total", nil) == 1
		})
		if got := testkit.MetricSum(t, r.Reg, "eventlog_consumed_total", nil); got != 50 {
			t.Fatalf("eventlog_consumed_total = %v, want 50 (duplicate %s excluded)", got, dup[0])
		}
		if err := r.Ready(); err != nil {
			t.Fatalf("Ready after consuming: %v", err)
		}
		adm := kadm.NewClient(cl)
		testkit.Eventually(t, 15*time.Second, "the group's lag in kafka to reach 0", func() bool {
			ls, err := adm.Lag(context.Background(), group)
			if err != nil {
				return false
			}
			l := ls[group]
			return l.Error() == nil && l.Lag.Total() == 0
		})
		testkit.Eventually(t, 5*time.Second, "the lag gauge to reach 0", func() bool {
			return testkit.MetricSum(t, r.Reg, "eventlog_consumer_lag_records", nil) == 0
		})
		for id, n := range tr.Seen() {
			if n != 1 {
				t.Errorf("event %s processed %d times in one process", id, n)
			}
		}
	})
}

// TestConsumerResumesAfterGracefulStop checks that a member stopped
// gracefully commits what it processed, so its successor resumes after it
// and processes only the events it has not seen.
func TestConsumerResumesAfterGracefulStop(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := depstest.Topic(t, k, 1)
		group := depstest.Group(t)
		cl := depstest.Client(t, k)

		first := produce(t, cl, topic, "first", 30)
		tr1 := eventlogtest.NewTracker()
		r1 := eventlogtest.Start(t, eventlog.ConsumerConfig{Brokers: k.Brokers, Topic: topic, Group: group, Processed: tr1.Add})
		testkit.Eventually(t, 30*time.Second, "the first events processed", func() bool { return tr1.Has(first) })
		if err := r1.Stop(); err != nil {
			t.Fatalf("Run after a graceful stop = %v, want nil", err)
		}

		second := produce(t, cl, topic, "second", 30)
		tr2 := eventlogtest.NewTracker()
		eventlogtest.Start(t, eventlog.ConsumerConfig{Brokers: k.Brokers, Topic: topic, Group: group, Processed: tr2.Add})
		testkit.Eventually(t, 30*time.Second, "the second events processed by the successor", func() bool { return tr2.Has(second) })
		seen2 := tr2.Seen()
		for _, id := range first {
			if seen2[id] > 0 {
				t.Fatalf("the successor processed %s again: the graceful stop did not commit", id)
			}
		}
	})
}
