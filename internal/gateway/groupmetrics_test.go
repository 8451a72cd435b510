package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// histogram returns the sum and count of the histogram name's series
// whose labels include labels.
func histogram(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (sum float64, count uint64) {
	t.Helper()
	mf := testkit.Family(t, reg, name)
	if mf == nil {
		return 0, 0
	}
series:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue series
			}
		}
		sum += m.GetHistogram().GetSampleSum()
		count += m.GetHistogram().GetSampleCount()
	}
	return sum, count
}

// TestGroupMetricsMove: a subscriber that receives and does not ack makes
// databus_oldest_unacked_age_seconds of its group rise, and the group's
// databus_consumer_lag grow with each message published; once it acks,
// both fall to 0.
func TestGroupMetricsMove(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 2)
		group := depstest.Group(t)
		reg := prometheus.NewRegistry()
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg,
			CommitInterval: 50 * time.Millisecond, LagInterval: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c := w.client(t)
		pub, err := c.NewPublisher(ctx, topic, databus.Aggregation(true))
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		sub, err := c.OpenSubscription(ctx, topic, group)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		ours := map[string]string{"group": group, "topic": topic}
		lag := func() float64 { return testkit.MetricSum(t, reg, "databus_consumer_lag", ours) }
		age := func() float64 { return testkit.MetricSum(t, reg, "databus_oldest_unacked_age_seconds", ours) }

		var held []databus.Delivery
		publishAndReceive := func(from, n int) {
			t.Helper()
			if err := pub.Publish(ctx, msgs(from, n)...); err != nil {
				t.Fatal(err)
			}
			for got := 0; got < n; {
				b, err := sub.Recv()
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, b.Messages...)
				got += len(b.Messages)
			}
		}
		publishAndReceive(0, 10)
		testkit.EventuallyNil(t, 20*time.Second, "the lag of 10 messages delivered, not acked", func() error {
			if got := lag(); got != 10 {
				return fmt.Errorf("lag %v", got)
			}
			return nil
		})
		first := age()
		if first <= 0 {
			t.Fatalf("oldest unacked age %v with 10 messages unacked", first)
		}
		testkit.Eventually(t, 20*time.Second, "the oldest unacked age rises while nothing is acked", func() bool {
			return age() >= first+0.2
		})

		publishAndReceive(10, 15)
		testkit.EventuallyNil(t, 20*time.Second, "the lag grows with what is published and not acked", func() error {
			if got := lag(); got != 25 {
				return fmt.Errorf("lag %v, want 25", got)
			}
			return nil
		})

		if err := sub.Ack(held...); err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyNil(t, 20*time.Second, "lag and age fall to 0 once everything is acked", func() error {
			if l, a := lag(), age(); l != 0 || a != 0 {
				return fmt.Errorf("lag %v, oldest unacked age %v", l, a)
			}
			return nil
		})
		// Both partitions have a series while the group is served here.
		if n := len(testkit.Family(t, reg, "databus_consumer_lag").GetMetric()); n != 2 {
			t.Errorf("%d lag series, want one per partition (2)", n)
		}
	})
}

// TestClientWaitSeconds: databus_client_wait_seconds counts the time a
// publish stream waits for its client's next batch (a client that opens
// its stream and sleeps before publishing, as the report found its
// checker did) and the time a send waits on a subscriber that does not
// read (until --send-timeout ends it).
func TestClientWaitSeconds(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const sleep, sendTimeout = time.Second, time.Second
		topic := newTopic(t, k, 1)
		reg := prometheus.NewRegistry()
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg, SendTimeout: sendTimeout})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		pub, err := w.client(t).NewPublisher(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		time.Sleep(sleep)
		if err := pub.Publish(ctx, msgs(0, 1)...); err != nil {
			t.Fatal(err)
		}
		// The stream starts after the client's: it waited a little less
		// than the client slept.
		if sum, n := histogram(t, reg, "databus_client_wait_seconds", map[string]string{"kind": "publish"}); n == 0 || sum < sleep.Seconds()/2 {
			t.Errorf("publish streams waited %.3f s in %d waits on a client that slept %v before its first batch", sum, n, sleep)
		}

		// 300 KiB of messages against a window of 64 KiB the client never
		// opens further.
		publishBig(t, k, topic, 300, 1<<10)
		stalledSubscriber(t, ctx, w.addr, topic, depstest.Group(t))
		testkit.EventuallyNil(t, 20*time.Second, "a send held by the client's flow control, observed as it ends", func() error {
			if sum, _ := histogram(t, reg, "databus_client_wait_seconds", map[string]string{"kind": "subscribe"}); sum < sendTimeout.Seconds() {
				return fmt.Errorf("subscribe sends waited %.3f s", sum)
			}
			return nil
		})
	})
}
