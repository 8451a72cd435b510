package gateway_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// publishBig publishes n messages of size random bytes each (keys
// "0".."n-1") straight to Kafka, in record batches of at most 8 of them:
// Kafka hands out a record batch whole, and bounds fetches in bytes as
// stored (compressed), so the batches' size, and the values' randomness,
// set the grain of what a fetch can bring past the gateway's limits.
func publishBig(t *testing.T, k *deps.Kafka, topic string, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := depstest.Client(t, k, kgo.ProducerBatchMaxBytes(int32(8*size+1024)), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var batch []*kgo.Record
	for i := range n {
		batch = append(batch, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: randomBytes(size)})
		if len(batch) == 64 || i == n-1 {
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

// stalledSubscriber opens a subscribe stream on a connection of its own
// whose HTTP/2 windows stay at 64 KiB (a fixed window turns off grpc-go's
// growth of it), and never reads it: what a client stuck in its handler
// looks like to the gateway.
func stalledSubscriber(t *testing.T, ctx context.Context, addr, topic, group string, md ...string) databusv1.DataBus_SubscribeClient {
	t.Helper()
	api := rawConn(t, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	s, err := api.Subscribe(metadata.AppendToOutgoingContext(ctx, append([]string{gateway.MDTopic, topic, gateway.MDGroup, group}, md...)...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStalledSubscriberTimesOut: a subscriber that stops reading must not
// keep its partitions. Its send waits at most --send-timeout; then its
// stream ends with DeadlineExceeded naming the flag, and the messages it
// held go to the group's other stream. (Before, the send waited forever
// and the partition stayed with the stalled stream: the other got nothing.)
func TestStalledSubscriberTimesOut(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const total, size = 600, 1 << 10
		topic := newTopic(t, k, 1)
		reg := prometheus.NewRegistry()
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, SendTimeout: 2 * time.Second, CommitInterval: 100 * time.Millisecond, Registry: reg})
		publishBig(t, k, topic, total, size)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		stalled := stalledSubscriber(t, ctx, w.addr, topic, "g")
		testkit.EventuallyNil(t, 20*time.Second, "the stalled stream owns the partition and was sent messages", func() error {
			if got := testkit.MetricSum(t, reg, "databus_messages_out_total", nil); got == 0 {
				return fmt.Errorf("nothing sent yet")
			}
			return nil
		})
		// A second stream of the group, on the same gateway: with one
		// partition, it gets it only when the stalled one lets go.
		got := w.subscribeKeys(t, ctx, topic, "g")
		start := time.Now()
		got.await(t, 30*time.Second, "the other stream receives every message, those sent to the stalled one included", total, nil)
		t.Logf("the other stream had every message %v after it subscribed", time.Since(start).Round(time.Millisecond))
		if n := testkit.MetricSum(t, reg, "databus_send_timeouts_total", nil); n != 1 {
			t.Fatalf("databus_send_timeouts_total = %v, want 1", n)
		}
		// The stalled client, reading at last, finds its stream ended with a
		// status that says why.
		for {
			_, err := stalled.Recv()
			if err == nil {
				continue
			}
			st, _ := status.FromError(err)
			if st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "--send-timeout") {
				t.Fatalf("stalled stream ended with %v, want DeadlineExceeded naming --send-timeout", err)
			}
			t.Logf("stalled stream: %s", st.Message())
			break
		}
	})
}

// TestSubscribeBytesInFlightBounded: streams that do not read hold the
// gateway's sends; what it fetched for them and could not send yet stays
// under --max-stream-bytes per stream and --max-gateway-bytes in all, give
// or take a fetch and the send in progress, far below what their caps of
// unacked messages would let through. Once they read, everything arrives
// and the count returns to zero.
func TestSubscribeBytesInFlightBounded(t *testing.T) {
	const (
		total, size = 1000, 4 << 10 // 4 MB per group
		// What a fetch may bring past a limit (per partition 32 KiB, or one
		// whole record batch of 8 messages), and the batch of 10 messages
		// being sent.
		slack = 2*(8*size+1024) + 10*size
	)
	for _, tc := range []struct {
		name                 string
		groups               int
		streamLimit, gwLimit int64
		wantBelow            int64
	}{
		{"stream", 1, 64 << 10, 0, 64<<10 + slack},
		{"gateway", 2, 0, 128 << 10, 128<<10 + 2*slack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := kafkaFor(t, deps.KafkaFake)
			topic := newTopic(t, k, 2)
			reg := prometheus.NewRegistry()
			w := startGateway(t, gateway.Config{Brokers: k.Brokers, MaxStreamBytes: tc.streamLimit, MaxGatewayBytes: tc.gwLimit, Registry: reg})
			publishBig(t, k, topic, total, size)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var subs []databusv1.DataBus_SubscribeClient
			for g := range tc.groups {
				subs = append(subs, stalledSubscriber(t, ctx, w.addr, topic, fmt.Sprint("g", g), gateway.MDMaxUnacked, "100000", gateway.MDBatchSize, "10"))
			}
			inFlight := func() float64 {
				return testkit.MetricSum(t, reg, "databus_bytes_in_flight", map[string]string{"kind": "subscribe"})
			}
			last, since := -1.0, time.Now()
			testkit.EventuallyNil(t, 20*time.Second, "bytes in flight to settle", func() error {
				n := inFlight()
				if n != last || n == 0 {
					last, since = n, time.Now()
					return fmt.Errorf("%v bytes", n)
				}
				if time.Since(since) < time.Second {
					return fmt.Errorf("%v bytes, waiting", n)
				}
				return nil
			})
			t.Logf("%d stalled streams: %v bytes in flight (bound %d), %v messages sent", tc.groups, last, tc.wantBelow, testkit.MetricSum(t, reg, "databus_messages_out_total", nil))
			if last > float64(tc.wantBelow) {
				t.Fatalf("%v bytes in flight for %d stalled streams, want under %d", last, tc.groups, tc.wantBelow)
			}
			// Reading and acking, each stream gets its whole group's share.
			var wg sync.WaitGroup
			for i, s := range subs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					seen := map[string]bool{}
					for len(seen) < total {
						resp, err := s.Recv()
						if err != nil {
							t.Errorf("stream %d after %d messages: %v", i, len(seen), err)
							return
						}
						req := &databusv1.SubscribeRequest{}
						for _, m := range resp.Messages {
							seen[string(m.Key)] = true
							req.Acks = append(req.Acks, &databusv1.Ack{Partition: m.Partition, Offset: m.Offset})
						}
						if err := s.Send(req); err != nil {
							t.Errorf("stream %d: ack: %v", i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			testkit.EventuallyNil(t, 10*time.Second, "bytes counted off", func() error {
				if n := inFlight(); n != 0 {
					return fmt.Errorf("%v bytes still counted", n)
				}
				return nil
			})
		})
	}
}
