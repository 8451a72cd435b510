package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
)

// gw is a gateway serving gRPC on 127.0.0.1, restartable on its address.
type gw struct {
	t    *testing.T
	cfg  gateway.Config
	addr string
	g    *gateway.Gateway
	srv  *grpc.Server
	stop context.CancelFunc
}

func startGateway(t *testing.T, cfg gateway.Config) *gw {
	t.Helper()
	w := &gw{t: t, cfg: cfg, addr: "127.0.0.1:0"}
	w.start()
	t.Cleanup(w.close)
	return w
}

func (w *gw) start() {
	w.t.Helper()
	g, err := gateway.New(w.cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	var ln net.Listener
	for range 50 { // after a restart the old port may linger briefly
		if ln, err = net.Listen("tcp", w.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	w.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	w.g, w.srv, w.stop = g, gateway.NewServer(ctx, g, gateway.ServerOptions{}), cancel
	go w.srv.Serve(ln)
}

// close drains (finishing batches in flight) and stops the gateway.
func (w *gw) close() {
	if w.g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.g.Drain(ctx)
	w.srv.Stop()
	w.g.Close()
	w.stop()
	w.g = nil
}

func (w *gw) restart() { w.close(); w.start() }

func (w *gw) client(t *testing.T) *databus.Client {
	t.Helper()
	c, err := databus.Dial(w.addr, databus.WithBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// forEachKafka runs test against kfake and the real broker (depstest
// skips the real one in -short mode or when HLAB_TEST_KAFKA=kfake).
func forEachKafka(t *testing.T, test func(t *testing.T, k *deps.Kafka)) {
	for _, kind := range deps.KafkaKinds {
		t.Run(string(kind), func(t *testing.T) { test(t, depstest.Kafka(t, kind)) })
	}
}

func newTopic(t *testing.T, k *deps.Kafka, partitions int) string {
	t.Helper()
	return depstest.Topic(t, k, partitions)
}

func msgs(from, n int) []databus.Message {
	out := make([]databus.Message, n)
	for i := range out {
		seq := strconv.Itoa(from + i)
		out[i] = databus.Message{Key: []byte(seq), Value: []byte("value-" + seq), Headers: []databus.Header{{Key: "seq", Value: []byte(seq)}}}
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes (nats' checkFor).
func waitFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPublishSubscribeRoundTrip(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 4)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for _, agg := range []bool{false, true} {
			pub, err := w.client(t).NewPublisher(ctx, topic, databus.Aggregation(agg))
			if err != nil {
				t.Fatal(err)
			}
			for b := range 5 {
				if err := pub.Publish(ctx, msgs(b*100+btoi(agg)*500, 100)...); err != nil {
					t.Fatalf("aggregation %v batch %d: %v", agg, b, err)
				}
			}
			pub.Close()
		}
		got := map[string]databus.Delivery{}
		var mu sync.Mutex
		sctx, scancel := context.WithCancel(ctx)
		go w.client(t).Subscribe(sctx, topic, "g", func(_ context.Context, ds []databus.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range ds {
				got[string(d.Key)] = d
			}
			return nil
		})
		waitFor(t, 30*time.Second, "all 1000 messages consumed", func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(got) < 1000 {
				return fmt.Errorf("%d of 1000", len(got))
			}
			return nil
		})
		scancel()
		d := got["42"]
		if string(d.Value) != "value-42" || len(d.Headers) != 1 || string(d.Headers[0].Value) != "42" || d.Topic != topic || d.Timestamp.IsZero() {
			t.Fatalf("message 42 arrived as %+v", d)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rawStream opens a stream with exactly the given metadata, to test what
// the gateway says about bad settings.
func rawPublish(t *testing.T, addr string, md ...string) databusv1.DataBus_PublishClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
	s, err := databusv1.NewDataBusClient(conn).Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBadInputStatuses(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := newTopic(t, k, 1)
	w := startGateway(t, gateway.Config{Brokers: k.Brokers, MaxMessageBytes: 1000})
	ctx := context.Background()

	publishErr := func(md ...string) error {
		s := rawPublish(t, w.addr, md...)
		s.Send(&databusv1.PublishRequest{BatchId: 1, Messages: []*databusv1.Message{{Value: []byte("x")}}})
		_, err := s.Recv()
		return err
	}
	tests := []struct {
		name string
		err  func() error
		code codes.Code
	}{
		{"no topic", func() error { return publishErr() }, codes.InvalidArgument},
		{"bad topic name", func() error { return publishErr(gateway.MDTopic, "no spaces allowed") }, codes.InvalidArgument},
		{"bad aggregation", func() error { return publishErr(gateway.MDTopic, topic, gateway.MDAggregation, "maybe") }, codes.InvalidArgument},
		{"bad max in flight", func() error { return publishErr(gateway.MDTopic, topic, gateway.MDMaxInflight, "0") }, codes.InvalidArgument},
		{"unknown topic", func() error { return publishErr(gateway.MDTopic, "nosuch-topic") }, codes.NotFound},
		{"subscribe without group", func() error {
			sub, err := w.client(t).OpenSubscription(ctx, topic, "x")
			if err != nil {
				return err
			}
			sub.Close()
			conn, _ := grpc.NewClient(w.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			defer conn.Close()
			s, _ := databusv1.NewDataBusClient(conn).Subscribe(metadata.AppendToOutgoingContext(ctx, gateway.MDTopic, topic))
			_, err = s.Recv()
			return err
		}, codes.InvalidArgument},
		{"oversize message", func() error {
			pub, err := w.client(t).NewPublisher(ctx, topic)
			if err != nil {
				return err
			}
			defer pub.Close()
			err = pub.Publish(ctx, databus.Message{Value: make([]byte, 2000)}, databus.Message{Value: []byte("fine")})
			var pe *databus.PublishError
			if !errors.As(err, &pe) || pe.Stored != 1 || len(pe.Records) != 1 || pe.Records[0].Index != 0 {
				return fmt.Errorf("want the first record refused and the second stored, got %v", err)
			}
			return status.Error(pe.Records[0].Code, pe.Records[0].Message)
		}, codes.InvalidArgument},
		{"too many in flight", func() error {
			s := rawPublish(t, w.addr, gateway.MDTopic, topic, gateway.MDMaxInflight, "1")
			for i := range 200 {
				if s.Send(&databusv1.PublishRequest{BatchId: uint64(i), Messages: []*databusv1.Message{{Value: make([]byte, 100)}}}) != nil {
					break
				}
			}
			for {
				if _, err := s.Recv(); err != nil {
					return err
				}
			}
		}, codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			st, _ := status.FromError(err)
			if st.Code() != tt.code {
				t.Fatalf("got %v, want %s", err, tt.code)
			}
			if len(st.Message()) < 20 || st.Message()[:8] != "databus:" {
				t.Fatalf("message %q should start with databus: and say what to do", st.Message())
			}
			t.Logf("%s: %s", st.Code(), st.Message())
		})
	}
}

func TestKafkaUnreachableIsUnavailable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	w := startGateway(t, gateway.Config{Brokers: []string{addr}, KafkaTimeout: 500 * time.Millisecond})
	s := rawPublish(t, w.addr, gateway.MDTopic, "orders")
	s.Send(&databusv1.PublishRequest{BatchId: 1})
	_, err := s.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
}

func TestEchoMode(t *testing.T) {
	w := startGateway(t, gateway.Config{Echo: true})
	ctx := context.Background()
	pub, err := w.client(t).NewPublisher(ctx, "anything", databus.MaxInflight(64))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fails []error
	for i := range 500 {
		wg.Add(1)
		if err := pub.PublishAsync(ctx, msgs(i, 1), func(err error) {
			if err != nil {
				mu.Lock()
				fails = append(fails, err)
				mu.Unlock()
			}
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	pub.Close()
	if len(fails) > 0 {
		t.Fatalf("%d echo publishes failed, first: %v", len(fails), fails[0])
	}
	sub, _ := w.client(t).OpenSubscription(ctx, "anything", "g")
	if _, err := sub.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("subscribe in echo mode: %v, want FailedPrecondition", err)
	}
}

// TestKilledSubscriberRedelivers: a member receives a batch and dies
// before acking; another member of the group receives those messages.
func TestKilledSubscriberRedelivers(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 2)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		pub, _ := w.client(t).NewPublisher(ctx, topic)
		if err := pub.Publish(ctx, msgs(0, 200)...); err != nil {
			t.Fatal(err)
		}
		pub.Close()

		// A takes every partition (it is alone), receives, acks nothing, dies.
		a, err := w.client(t).OpenSubscription(ctx, topic, "g", databus.BatchSize(50))
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]bool{}
		for len(held) == 0 {
			b, err := a.Recv()
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range b.Messages {
				held[string(d.Key)] = true
			}
		}
		a.Close()

		got := map[string]bool{}
		var mu sync.Mutex
		bctx, bcancel := context.WithCancel(ctx)
		defer bcancel()
		go w.client(t).Subscribe(bctx, topic, "g", func(_ context.Context, ds []databus.Delivery) error {
			mu.Lock()
			for _, d := range ds {
				got[string(d.Key)] = true
			}
			mu.Unlock()
			return nil
		})
		waitFor(t, 30*time.Second, "B receives what A held unacked", func() error {
			mu.Lock()
			defer mu.Unlock()
			for key := range held {
				if !got[key] {
					return fmt.Errorf("message %s not redelivered (%d of %d so far)", key, len(got), 200)
				}
			}
			return nil
		})
	})
}

// TestOutOfOrderAcksNeverPassAGap acks every message but the first: the
// committed offset must not move; once the first is acked it covers all.
func TestOutOfOrderAcksNeverPassAGap(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 1)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 50 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		pub, _ := w.client(t).NewPublisher(ctx, topic)
		if err := pub.Publish(ctx, msgs(0, 10)...); err != nil {
			t.Fatal(err)
		}
		pub.Close()
		sub, err := w.client(t).OpenSubscription(ctx, topic, "g")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		var ds []databus.Delivery
		for len(ds) < 10 {
			b, err := sub.Recv()
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, b.Messages...)
		}
		// Ack 9, 8, ..., 1: everything but offset 0, in reverse.
		for i := 9; i >= 1; i-- {
			if err := sub.Ack(ds[i]); err != nil {
				t.Fatal(err)
			}
		}
		admin, err := k.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		committed := func() int64 {
			offs, err := kadm.NewClient(admin).FetchOffsets(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := offs.Lookup(topic, 0); ok {
				return o.At
			}
			return -1
		}
		// Several commit intervals pass with acks past the gap.
		time.Sleep(500 * time.Millisecond)
		if c := committed(); c > ds[0].Offset {
			t.Fatalf("committed %d past the unacked offset %d", c, ds[0].Offset)
		}
		sub.Ack(ds[0])
		waitFor(t, 10*time.Second, "commit after the gap closed", func() error {
			if c := committed(); c != ds[9].Offset+1 {
				return fmt.Errorf("committed %d, want %d", c, ds[9].Offset+1)
			}
			return nil
		})
	})
}

// TestGatewayRestartLosesNothing restarts the gateway while a publisher
// runs: every batch acked to the publisher is in Kafka.
func TestGatewayRestartLosesNothing(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 3)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		pub, err := w.client(t).NewPublisher(ctx, topic, databus.MaxInflight(8))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		acked := map[string]bool{}
		var failed []error
		var wg sync.WaitGroup
		const batches = 400
		for i := range batches {
			if i == batches/2 {
				w.restart()
			}
			batch := msgs(i*10, 10)
			wg.Add(1)
			if err := pub.PublishAsync(ctx, batch, func(err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				for _, m := range batch {
					acked[string(m.Key)] = true
				}
			}); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		pub.Close()
		if len(failed) > 0 {
			t.Logf("%d batches failed (the publisher reports them; they are not counted as acked), first: %v", len(failed), failed[0])
		}
		// Read the topic straight from Kafka.
		cl, err := k.NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		stored := map[string]bool{}
		waitFor(t, 30*time.Second, "every acked message in Kafka", func() error {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { stored[string(r.Key)] = true })
			pcancel()
			lost := 0
			for key := range acked {
				if !stored[key] {
					lost++
				}
			}
			if lost > 0 {
				return fmt.Errorf("%d of %d acked messages missing", lost, len(acked))
			}
			return nil
		})
		if len(acked) < batches*10/2 {
			t.Fatalf("only %d messages acked: the publisher did not recover after the restart", len(acked))
		}
		t.Logf("%d messages acked, all found in Kafka (%d distinct stored)", len(acked), len(stored))
	})
}

// kafkaFor returns the test binary's shared Kafka of kind.
func kafkaFor(t *testing.T, kind deps.KafkaKind) *deps.Kafka { return depstest.Kafka(t, kind) }
