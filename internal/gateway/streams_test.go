package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// awaitStreams waits (timeout at most) until the gateway has n streams
// of kind open, by its databus_streams gauge.
func awaitStreams(t *testing.T, reg *prometheus.Registry, kind string, n int, timeout time.Duration) {
	t.Helper()
	testkit.EventuallyNil(t, timeout, fmt.Sprintf("%d %s streams open on the gateway", n, kind), func() error {
		if got := testkit.MetricSum(t, reg, "databus_streams", map[string]string{"kind": kind}); got != float64(n) {
			return fmt.Errorf("%v open", got)
		}
		return nil
	})
}

// TestPublishStreamsEndWhenClientsGo: a publish stream whose client went
// away (closed the stream, or dropped the connection) must end on the
// gateway, or every departed client leaks the stream's goroutines and
// memory. The stream's context ending used to race the last Recv error:
// when the receiving goroutine saw the context first, the stream's loop
// waited forever.
func TestPublishStreamsEndWhenClientsGo(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := startGateway(t, gateway.Config{Echo: true, Registry: reg})
	ctx := context.Background()
	for _, how := range []string{"publisher closed", "connection dropped"} {
		t.Run(how, func(t *testing.T) {
			const n = 200
			c, err := databus.Dial(w.addr)
			if err != nil {
				t.Fatal(err)
			}
			var pubs []*databus.Publisher
			for i := range n {
				pub, err := c.NewPublisher(ctx, "anything")
				if err != nil {
					t.Fatal(err)
				}
				if err := pub.Publish(ctx, msgs(i, 1)...); err != nil {
					t.Fatal(err)
				}
				pubs = append(pubs, pub)
			}
			if got := testkit.MetricSum(t, reg, "databus_streams", map[string]string{"kind": "publish"}); got != n {
				t.Fatalf("%v publish streams open on the gateway, want %d", got, n)
			}
			if how == "publisher closed" {
				for _, pub := range pubs {
					pub.Close()
				}
			}
			c.Close()
			awaitStreams(t, reg, "publish", 0, 10*time.Second)
		})
	}
}

// TestSubscribeStreamsEndWhenClientsGo: the same for subscribe streams.
func TestSubscribeStreamsEndWhenClientsGo(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	topic := newTopic(t, k, 2)
	reg := prometheus.NewRegistry()
	w := startGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg})
	ctx := context.Background()
	const n = 20
	c, err := databus.Dial(w.addr)
	if err != nil {
		t.Fatal(err)
	}
	var subs []*databus.Subscription
	for i := range n {
		sub, err := c.OpenSubscription(ctx, topic, fmt.Sprintf("g%d", i%4))
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	awaitStreams(t, reg, "subscribe", n, 10*time.Second)
	for _, s := range subs[:n/2] {
		s.Close()
	}
	c.Close()
	awaitStreams(t, reg, "subscribe", 0, 15*time.Second)
}

// TestKafkaRequestsCounted: the gateway counts the requests it writes to
// Kafka, so the load aggregation saves shows in its metrics.
func TestKafkaRequestsCounted(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	topic := newTopic(t, k, 1)
	reg := prometheus.NewRegistry()
	w := startGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg})
	ctx := context.Background()
	// One batch first, so the producers know the new topic's leader: the
	// batches counted below are not retried for that.
	w.publishAll(t, ctx, topic, 1)
	for _, agg := range []bool{false, true} {
		before := testkit.MetricSum(t, reg, "databus_kafka_requests_total", map[string]string{"api": "Produce"})
		pub, err := w.client(t).NewPublisher(ctx, topic, databus.Aggregation(agg))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := pub.Publish(ctx, msgs(i*10, 10)...); err != nil {
				t.Fatal(err)
			}
		}
		pub.Close()
		// Each batch is one Produce, or fewer with aggregation; franz-go may
		// retry one that failed transiently, so up to one retry each.
		if got := testkit.MetricSum(t, reg, "databus_kafka_requests_total", map[string]string{"api": "Produce"}) - before; got < 1 || got > 10 {
			t.Fatalf("aggregation %v: %v Produce requests counted for 5 synchronous batches, want 1 to 10", agg, got)
		}
	}
	if testkit.MetricSum(t, reg, "databus_kafka_requests_total", map[string]string{"api": "Metadata"}) == 0 {
		t.Fatal("no Metadata requests counted")
	}
}

// TestInflightLimitCountsWhatTheClientHasInFlight: a client that sends its
// next batch as soon as an answer arrives, at the limit, is never refused.
// (The gateway used to count a batch off just after queueing its answer,
// on another goroutine than the one sending it, so a thread descheduled
// between the two could see the client's next batch refused with
// ResourceExhausted. That window was too narrow to show here; this test
// guards the accounting as it is now: counted off before the answer is
// sent, by the goroutine that sends it.)
func TestInflightLimitCountsWhatTheClientHasInFlight(t *testing.T) {
	w := startGateway(t, gateway.Config{Echo: true})
	const limit = 4
	s := rawPublish(t, w.addr, gateway.MDTopic, "anything", gateway.MDMaxInflight, fmt.Sprint(limit))
	send := func(id uint64) {
		if err := s.Send(&databusv1.PublishRequest{BatchId: id, Messages: []*databusv1.Message{{Value: []byte("x")}}}); err != nil {
			t.Fatalf("send %d: %v", id, err)
		}
	}
	for id := range uint64(limit) {
		send(id)
	}
	for id := uint64(limit); id < 20000; id++ {
		if _, err := s.Recv(); err != nil {
			t.Fatalf("after %d batches at the limit of %d in flight: %v", id-limit, limit, err)
		}
		send(id)
	}
}
