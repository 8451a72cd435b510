package gateway_test

import (
	"context"

	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// refusal checks err is ResourceExhausted naming flag.
func refusal(t *testing.T, err error, flag string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), flag) || !strings.HasPrefix(st.Message(), "databus:") {
		t.Fatalf("got %v, want ResourceExhausted with a databus: message naming %s", err, flag)
	}
	t.Logf("refused: %s", st.Message())
}

func rawConn(t *testing.T, addr string, opts ...grpc.DialOption) databusv1.DataBusClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return databusv1.NewDataBusClient(conn)
}

// openPublishStream opens a publish stream with md and publishes one small
// batch: the stream's first answer or error.
func openPublishStream(ctx context.Context, api databusv1.DataBusClient, md ...string) (databusv1.DataBus_PublishClient, error) {
	s, err := api.Publish(metadata.AppendToOutgoingContext(ctx, md...))
	if err != nil {
		return nil, err
	}
	if err := s.Send(&databusv1.PublishRequest{BatchId: 1, Messages: []*databusv1.Message{{Value: []byte("x")}}}); err != nil {
		_, err = s.Recv()
		return nil, err
	}
	if _, err := s.Recv(); err != nil {
		return nil, err
	}
	return s, nil
}

func TestStreamLimitRefuses(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := startGateway(t, gateway.Config{Echo: true, MaxStreams: 3, Registry: reg})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api := rawConn(t, w.addr)
	var open []databusv1.DataBus_PublishClient
	for i := range 3 {
		s, err := openPublishStream(ctx, api, gateway.MDTopic, "t")
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		open = append(open, s)
	}
	_, err := openPublishStream(ctx, api, gateway.MDTopic, "t")
	refusal(t, err, "--max-streams")
	if got := testkit.MetricSum(t, reg, "databus_refusals_total", map[string]string{"limit": "streams"}); got != 1 {
		t.Fatalf("databus_refusals_total{limit=streams} = %v, want 1", got)
	}
	// A stream that ends frees its place.
	open[0].CloseSend()
	if _, err := open[0].Recv(); err == nil {
		t.Fatal("want the closed stream to end")
	}
	testkit.EventuallyNil(t, 10*time.Second, "a place frees when a stream ends", func() error {
		_, err := openPublishStream(ctx, api, gateway.MDTopic, "t")
		return err
	})
}

func TestKafkaClientLimitRefuses(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	topic := newTopic(t, k, 2)
	reg := prometheus.NewRegistry()
	// The shared producer, and one more.
	w := startGateway(t, gateway.Config{Brokers: k.Brokers, MaxKafkaClients: 2, Registry: reg})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	api := rawConn(t, w.addr)
	if _, err := openPublishStream(ctx, api, gateway.MDTopic, topic); err != nil {
		t.Fatal(err)
	}
	_, err := openPublishStream(ctx, api, gateway.MDTopic, topic)
	refusal(t, err, "--max-kafka-clients")
	// Aggregated streams share the shared producer: never refused for it.
	for range 3 {
		if _, err := openPublishStream(ctx, api, gateway.MDTopic, topic, gateway.MDAggregation, "on"); err != nil {
			t.Fatal(err)
		}
	}
	// A group needs a client of its own: refused too.
	sub, err := w.client(t).OpenSubscription(ctx, topic, "g")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sub.Recv()
	refusal(t, err, "--max-kafka-clients")
	if got := testkit.MetricSum(t, reg, "databus_refusals_total", map[string]string{"limit": "kafka_clients"}); got != 2 {
		t.Fatalf("databus_refusals_total{limit=kafka_clients} = %v, want 2", got)
	}
	if got := testkit.MetricSum(t, reg, "databus_kafka_clients", map[string]string{"kind": "producer"}) + testkit.MetricSum(t, reg, "databus_kafka_clients", map[string]string{"kind": "shared"}); got != 2 {
		t.Fatalf("databus_kafka_clients = %v, want 2", got)
	}
}

// TestStreamsPerConnection: past grpc.MaxConcurrentStreams a client's new
// stream waits for one of its others to end (gRPC enforces it per
// connection, and grpc-go queues rather than fails).
func TestStreamsPerConnection(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := startGateway(t, gateway.Config{Echo: true, MaxStreamsPerConnection: 2, Registry: reg})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := rawConn(t, w.addr)
	a, err := openPublishStream(ctx, api, gateway.MDTopic, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openPublishStream(ctx, api, gateway.MDTopic, "t"); err != nil {
		t.Fatal(err)
	}
	third := make(chan error, 1)
	go func() {
		_, err := openPublishStream(ctx, api, gateway.MDTopic, "t")
		third <- err
	}()
	// The gateway never sees a third stream on this connection...
	for range 10 {
		time.Sleep(30 * time.Millisecond)
		if got := testkit.MetricSum(t, reg, "databus_streams", map[string]string{"kind": "publish"}); got > 2 {
			t.Fatalf("%v streams open on one connection, limit 2", got)
		}
	}
	select {
	case err := <-third:
		t.Fatalf("third stream answered (%v) while two were open", err)
	default:
	}
	// ...until one ends.
	a.CloseSend()
	a.Recv()
	if err := <-third; err != nil {
		t.Fatal(err)
	}
}

// TestPublishBytesInFlightBounded: while Kafka holds its answers, a
// publish stream stops being read once its bytes in flight reach the
// limit; the gateway's total is bounded the same way. A batch larger than
// the per-stream limit is refused.
func TestPublishBytesInFlightBounded(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var holding atomic.Bool
	holding.Store(true)
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if holding.Load() {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	const (
		batchBytes  = 10 << 10
		streamLimit = 64 << 10
		gwLimit     = 100 << 10
	)
	reg := prometheus.NewRegistry()
	w := startGateway(t, gateway.Config{Brokers: c.ListenAddrs(), MaxStreamBytes: streamLimit, MaxGatewayBytes: gwLimit, Registry: reg})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Each stream on its own connection, so one held stream's unread
	// batches do not hold the other's in the connection's window.
	const batches = 30
	var answered atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		s, err := rawConn(t, w.addr).Publish(metadata.AppendToOutgoingContext(ctx, gateway.MDTopic, "held", gateway.MDMaxInflight, "1024"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			go func() {
				for i := range batches {
					if s.Send(&databusv1.PublishRequest{BatchId: uint64(i), Messages: []*databusv1.Message{{Value: make([]byte, batchBytes)}}}) != nil {
						return
					}
				}
			}()
			for range batches {
				resp, err := s.Recv()
				if err != nil {
					errs <- err
					return
				}
				if resp.Stored != 1 {
					errs <- fmt.Errorf("batch %d: stored %d, errors %v", resp.BatchId, resp.Stored, resp.Errors)
					return
				}
				answered.Add(1)
			}
		}()
	}
	inFlight := func() float64 {
		return testkit.MetricSum(t, reg, "databus_bytes_in_flight", map[string]string{"kind": "publish"})
	}
	testkit.EventuallyNil(t, 20*time.Second, "the gateway's budget filled", func() error {
		if got := inFlight(); got < gwLimit {
			return fmt.Errorf("%v bytes in flight", got)
		}
		return nil
	})
	for range 10 {
		// One batch per stream may cross a limit: it was read before the
		// stream's or the gateway's total reached it.
		if got := inFlight(); got > gwLimit+2*batchBytes {
			t.Fatalf("%v bytes in flight, over the gateway's %d", got, gwLimit)
		}
		time.Sleep(30 * time.Millisecond)
	}
	if answered.Load() != 0 {
		t.Fatalf("%d batches answered while Kafka held every produce", answered.Load())
	}
	holding.Store(false)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := answered.Load(); got != 2*batches {
		t.Fatalf("%d of %d batches answered", got, 2*batches)
	}
	testkit.EventuallyNil(t, 10*time.Second, "bytes released", func() error {
		if got := inFlight(); got != 0 {
			return fmt.Errorf("%v bytes still counted", got)
		}
		return nil
	})

	// A batch that can never fit the stream's limit is refused.
	s, err := rawConn(t, w.addr).Publish(metadata.AppendToOutgoingContext(ctx, gateway.MDTopic, "held"))
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&databusv1.PublishRequest{BatchId: 1, Messages: []*databusv1.Message{{Value: make([]byte, streamLimit/2)}, {Value: make([]byte, streamLimit/2)}, {Value: []byte("one too many")}}})
	_, err = s.Recv()
	refusal(t, err, "--max-stream-bytes")
}

// TestSubscribeStreamsOfAGroupShareAClient: the subscribe streams of one
// group on one gateway are one group member, one Kafka client; the
// gateway spreads the member's partitions over them, each partition to
// one stream at a time, and every message is delivered.
func TestSubscribeStreamsOfAGroupShareAClient(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const partitions, streams, total = 4, 6, 400
		topic := newTopic(t, k, partitions)
		reg := prometheus.NewRegistry()
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg, CommitInterval: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		w.publishAll(t, ctx, topic, total)

		// Each stream's view of what it owns, from its own notices, in the
		// order it received them: a stream may still receive messages of a
		// partition the gateway has meanwhile given to another stream (they
		// were sent before its revoke notice, and their acks are ignored),
		// so ownership is judged per stream, and exclusivity once the
		// notices have all arrived.
		var (
			mu      sync.Mutex
			owned   = make([]map[int32]bool, streams)
			got     = map[string]bool{}
			clashes []string
		)
		for i := range owned {
			owned[i] = map[int32]bool{}
		}
		// owners returns, under mu, the streams that own each partition.
		owners := func() map[int32][]int {
			out := map[int32][]int{}
			for i, ps := range owned {
				for p := range ps {
					out[p] = append(out[p], i)
				}
			}
			return out
		}
		c := w.client(t)
		for i := range streams {
			sub, err := c.OpenSubscription(ctx, topic, "g", databus.BatchSize(7))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			go func() {
				for {
					b, err := sub.Recv()
					if err != nil {
						return
					}
					mu.Lock()
					for _, p := range b.Revoked {
						delete(owned[i], p)
					}
					for _, p := range b.Assigned {
						owned[i][p] = true
					}
					for _, d := range b.Messages {
						if !owned[i][d.Partition] {
							clashes = append(clashes, fmt.Sprintf("stream %d got a message of partition %d, which it was not assigned", i, d.Partition))
						}
						got[string(d.Key)] = true
					}
					mu.Unlock()
					sub.Ack(b.Messages...)
				}
			}()
		}
		testkit.EventuallyNil(t, 60*time.Second, "every message delivered and every partition owned by one stream", func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(got) < total {
				return fmt.Errorf("%d of %d messages", len(got), total)
			}
			by := owners()
			for p := range int32(partitions) {
				if len(by[p]) != 1 {
					return fmt.Errorf("partition %d owned by streams %v", p, by[p])
				}
			}
			return nil
		})
		mu.Lock()
		if len(clashes) > 0 {
			t.Errorf("ownership broke: %v", clashes)
		}
		for i, ps := range owned {
			if len(ps) > 1 {
				t.Errorf("stream %d owns %d partitions while %d streams share %d partitions", i, len(ps), streams, partitions)
			}
		}
		mu.Unlock()
		if got := testkit.MetricSum(t, reg, "databus_kafka_clients", map[string]string{"kind": "member"}); got != 1 {
			t.Fatalf("%v group-member clients for %d streams of one group, want 1", got, streams)
		}
		// And nothing else fetches for them: the gateway's clients are the
		// shared producer (metadata) and the one member.
		if got := testkit.MetricSum(t, reg, "databus_kafka_clients", nil); got != 2 {
			t.Fatalf("%v Kafka clients for %d subscribe streams of one group, want 2 (the shared producer and the group's one member)", got, streams)
		}
	})
}

// TestHandoverWithinAGatewayRedelivers: two streams of a group on one
// gateway; the one holding unacked messages ends, and the other receives
// them (its partitions move to it, from the last acked offset).
func TestHandoverWithinAGatewayRedelivers(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 2)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		w.publishAll(t, ctx, topic, 200)

		// A, alone, owns both partitions; it acks nothing.
		a, err := w.client(t).OpenSubscription(ctx, topic, "g", databus.MaxUnacked(40), databus.BatchSize(10))
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]bool{}
		testkit.EventuallyNil(t, 30*time.Second, "A receives its cap", func() error {
			b, err := a.Recv()
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range b.Messages {
				held[string(d.Key)] = true
			}
			if len(held) < 40 {
				return fmt.Errorf("%d of 40", len(held))
			}
			return nil
		})
		got := w.subscribeKeys(t, ctx, topic, "g")
		// B takes a partition from A (redelivering A's unacked messages
		// of it); when A ends, B gets the other too.
		time.Sleep(200 * time.Millisecond)
		a.Close()
		got.await(t, 30*time.Second, "B receives everything, A's unacked messages included", 200, held)
	})
}

// TestStreamChurnLosesNothing: streams of one group come and go on one
// gateway (some ack, some hold messages unacked and leave) while messages
// are published; partitions move between streams each time. Every message
// must be acked by some stream in the end, and the group's commits must
// reach the end of every partition.
func TestStreamChurnLosesNothing(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const partitions, total = 4, 2000
		topic := newTopic(t, k, partitions)
		reg := prometheus.NewRegistry()
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 50 * time.Millisecond, Registry: reg})
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()

		var acked keys
		consume := func(ctx context.Context, ackEvery int, assigned chan<- struct{}) {
			sub, err := w.client(t).OpenSubscription(ctx, topic, "g", databus.MaxUnacked(50), databus.BatchSize(10))
			if err != nil {
				return
			}
			defer sub.Close()
			seen := 0
			for {
				b, err := sub.Recv()
				if err != nil {
					return
				}
				if len(b.Assigned) > 0 && assigned != nil {
					close(assigned)
					assigned = nil
				}
				var ack []databus.Delivery
				for _, d := range b.Messages {
					seen++
					if ackEvery == 0 || seen%ackEvery != 0 {
						ack = append(ack, d)
					}
				}
				if err := sub.Ack(ack...); err != nil {
					return
				}
				acked.add(ack...)
			}
		}
		// A stream that acks everything stays throughout, so the group's
		// member on this gateway does too: the churning streams' partitions
		// move between streams here, not between members through Kafka.
		// The churn starts once the member has its partitions.
		fctx, fcancel := context.WithCancel(ctx)
		defer fcancel()
		assigned := make(chan struct{})
		go consume(fctx, 0, assigned)
		select {
		case <-assigned:
		case <-ctx.Done():
			t.Fatal("the first stream was never assigned a partition")
		}
		pubDone := make(chan error, 1)
		go func() {
			pub, err := w.client(t).NewPublisher(ctx, topic)
			if err != nil {
				pubDone <- err
				return
			}
			defer pub.Close()
			for i := 0; i < total; i += 20 {
				if err := pub.Publish(ctx, msgs(i, 20)...); err != nil {
					pubDone <- err
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			pubDone <- nil
		}()
		// Churn: short-lived streams, a third of which leave a message of
		// every five unacked.
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctx, scancel := context.WithTimeout(ctx, time.Duration(100+50*i)*time.Millisecond)
				defer scancel()
				ackEvery := 0
				if i%3 == 0 {
					ackEvery = 5
				}
				consume(sctx, ackEvery, nil)
			}()
			time.Sleep(60 * time.Millisecond)
		}
		if err := <-pubDone; err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		// The stream that stayed finishes the job.
		acked.await(t, 60*time.Second, "every message acked", total, nil)
		if got := testkit.MetricSum(t, reg, "databus_partition_rewinds_total", nil); got == 0 {
			t.Error("no partition was rewound: the churn did not move partitions between streams holding messages")
		}
		admin := kadm.NewClient(depstest.Client(t, k))
		ends, err := admin.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyNil(t, 20*time.Second, "commits at the end of every partition", func() error {
			offs, err := admin.FetchOffsets(ctx, "g")
			if err != nil {
				return err
			}
			var behind []string
			ends.Each(func(e kadm.ListedOffset) {
				if o, ok := offs.Lookup(topic, e.Partition); !ok || o.At != e.Offset {
					behind = append(behind, fmt.Sprintf("partition %d at %d of %d", e.Partition, o.At, e.Offset))
				}
			})
			if len(behind) > 0 {
				return fmt.Errorf("%v", behind)
			}
			return nil
		})
	})
}
