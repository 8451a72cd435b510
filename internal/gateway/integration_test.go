package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// gw is a gateway serving gRPC on 127.0.0.1 until the test ends
// (gatewaytest.Start).
type gw struct {
	addr string
}

func startGateway(t *testing.T, cfg gateway.Config) *gw {
	t.Helper()
	return &gw{addr: gatewaytest.Start(t, cfg, gateway.ServerOptions{})}
}

// client is a client of w's, closed when the test ends.
func (w *gw) client(t *testing.T) *databus.Client {
	t.Helper()
	return dial(t, w.addr)
}

// dial dials a gateway at addr with opts, reconnecting after 20 ms at
// first and 200 ms at most; the client is closed when the test ends.
func dial(t *testing.T, addr string, opts ...databus.Option) *databus.Client {
	t.Helper()
	c, err := databus.Dial(addr, append([]databus.Option{databus.WithBackoff(20*time.Millisecond, 200*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
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

// publishAll publishes msgs(0, total) to topic through w, 50 a batch
// (the last one of what is left), and closes the publisher.
func (w *gw) publishAll(t *testing.T, ctx context.Context, topic string, total int) {
	t.Helper()
	pub, err := w.client(t).NewPublisher(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := 0; i < total; i += 50 {
		if err := pub.Publish(ctx, msgs(i, min(50, total-i))...); err != nil {
			t.Fatal(err)
		}
	}
}

// keys is a set of message keys, safe for concurrent use: what a test's
// subscribers received or acked, with how often.
type keys struct {
	mu sync.Mutex
	m  map[string]int
}

func (s *keys) add(ds ...databus.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]int{}
	}
	for _, d := range ds {
		s.m[string(d.Key)]++
	}
}

// await waits (timeout at most) until s holds n keys, every key of held
// among them (held: messages another stream held unacked, which must be
// redelivered).
func (s *keys) await(t *testing.T, timeout time.Duration, what string, n int, held map[string]bool) {
	t.Helper()
	testkit.EventuallyNil(t, timeout, what, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for key := range held {
			if s.m[key] == 0 {
				return fmt.Errorf("message %s, held unacked, not redelivered (%d of %d so far)", key, len(s.m), n)
			}
		}
		if len(s.m) < n {
			return fmt.Errorf("%d of %d", len(s.m), n)
		}
		return nil
	})
}

// subscribeKeys subscribes to topic in group through w until the test
// ends, acking every message, and returns the keys it receives.
func (w *gw) subscribeKeys(t *testing.T, ctx context.Context, topic, group string) *keys {
	t.Helper()
	c := w.client(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	got := &keys{}
	go c.Subscribe(ctx, topic, group, func(_ context.Context, ds []databus.Delivery) error {
		got.add(ds...)
		return nil
	})
	return got
}

// ackAllButOne receives from sub in a goroutine and acks every message
// but the one delivered at position skip (0: the first). It hands each
// batch to seen before acking it, with the message it leaves unacked when
// the batch has it (else nil). The channel returned gets the error that
// ends the subscription.
func ackAllButOne(sub *databus.Subscription, skip int, seen func(batch []databus.Delivery, unacked *databus.Delivery)) <-chan error {
	ended := make(chan error, 1)
	go func() {
		n := 0
		for {
			b, err := sub.Recv()
			if err != nil {
				ended <- err
				return
			}
			var ack []databus.Delivery
			var unacked *databus.Delivery
			for i := range b.Messages {
				if n == skip {
					unacked = &b.Messages[i]
				} else {
					ack = append(ack, b.Messages[i])
				}
				n++
			}
			seen(b.Messages, unacked)
			if err := sub.Ack(ack...); err != nil {
				ended <- err
				return
			}
		}
	}()
	return ended
}

func TestPublishSubscribeRoundTrip(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
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
		testkit.EventuallyNil(t, 30*time.Second, "all 1000 messages consumed", func() error {
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

// subscriberChildEnv carries "addr topic group" to the subscriber that
// TestKilledSubscriberRedelivers runs in a child process.
const subscriberChildEnv = "HLAB_GATEWAY_TEST_SUBSCRIBER"

// TestSubscriberChild is not a test of its own: it is the subscriber
// TestKilledSubscriberRedelivers runs in a child process (this test
// binary) and SIGKILLs. It joins the group, prints the keys of the first
// batch it receives ("held k1,k2,..."), acks nothing and waits to die.
func TestSubscriberChild(t *testing.T) {
	spec := os.Getenv(subscriberChildEnv)
	if spec == "" {
		t.Skip("the subscriber that TestKilledSubscriberRedelivers runs in a child process")
	}
	f := strings.Fields(spec)
	c, err := databus.Dial(f[0])
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.OpenSubscription(context.Background(), f[1], f[2], databus.BatchSize(50))
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Messages) == 0 {
			continue
		}
		keys := make([]string, len(b.Messages))
		for i, d := range b.Messages {
			keys[i] = string(d.Key)
		}
		fmt.Printf("held %s\n", strings.Join(keys, ","))
		time.Sleep(time.Hour) // until SIGKILL
	}
}

// TestKilledSubscriberRedelivers: a member, in a process of its own,
// receives a batch and is SIGKILLed before acking it; another member of
// the group receives those messages.
func TestKilledSubscriberRedelivers(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 2)
		group := depstest.Group(t)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		w.publishAll(t, ctx, topic, 200)

		// A takes every partition (it is alone), receives, acks nothing
		// and is killed.
		child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSubscriberChild$", "-test.count=1")
		child.Env = append(os.Environ(), subscriberChildEnv+"="+strings.Join([]string{w.addr, topic, group}, " "))
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		child.Stderr = &stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		defer child.Process.Kill()
		heldLine := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if keys, ok := strings.CutPrefix(sc.Text(), "held "); ok {
					heldLine <- keys
				}
			}
			close(heldLine)
		}()
		held := map[string]bool{}
		select {
		case keys, ok := <-heldLine:
			if !ok {
				child.Wait()
				t.Fatalf("the subscriber process ended without a batch:\n%s", stderr.String())
			}
			for _, key := range strings.Split(keys, ",") {
				held[key] = true
			}
		case <-ctx.Done():
			t.Fatalf("the subscriber process received nothing:\n%s", stderr.String())
		}
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		child.Wait()
		t.Logf("subscriber pid %d held %d messages unacked and was SIGKILLed (%v)", child.Process.Pid, len(held), child.ProcessState)

		w.subscribeKeys(t, ctx, topic, group).await(t, 60*time.Second, "B receives everything, what A held unacked included", 200, held)
	})
}

// TestOutOfOrderAcksNeverPassAGap acks every message but the first: the
// committed offset must not move; once the first is acked it covers all.
func TestOutOfOrderAcksNeverPassAGap(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 1)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 50 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		w.publishAll(t, ctx, topic, 10)
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
		testkit.EventuallyNil(t, 10*time.Second, "commit after the gap closed", func() error {
			if c := committed(); c != ds[9].Offset+1 {
				return fmt.Errorf("committed %d, want %d", c, ds[9].Offset+1)
			}
			return nil
		})
	})
}

// gatewayProcess is a gateway running as a process of its own (cmd/databus,
// built by the test), to be SIGKILLed and started again on its address.
type gatewayProcess struct {
	t      *testing.T
	bin    string
	args   []string
	addr   string
	log    testkit.SyncBuffer
	cmd    *exec.Cmd
	exited chan struct{}
}

func startGatewayProcess(t *testing.T, bin string, args ...string) *gatewayProcess {
	t.Helper()
	g := &gatewayProcess{t: t, bin: bin, addr: testkit.FreeAddr(t)}
	g.args = append([]string{"--grpc-addr", g.addr, "--http-addr", testkit.FreeAddr(t)}, args...)
	g.start()
	t.Cleanup(func() {
		g.kill()
		if t.Failed() {
			t.Logf("gateway output:\n%s", g.log.String())
		}
	})
	return g
}

// start runs the gateway and returns once it accepts connections.
func (g *gatewayProcess) start() {
	g.t.Helper()
	g.cmd = exec.Command(g.bin, g.args...)
	g.cmd.Stdout, g.cmd.Stderr = &g.log, &g.log
	if err := g.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.exited = make(chan struct{})
	go func() { g.cmd.Wait(); close(g.exited) }()
	testkit.EventuallyNil(g.t, 30*time.Second, "the gateway process serves", func() error {
		select {
		case <-g.exited:
			g.t.Fatalf("the gateway exited: %v\n%s", g.cmd.ProcessState, g.log.String())
		default:
		}
		c, err := net.DialTimeout("tcp", g.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// kill SIGKILLs the gateway: no drain, no commit, no goodbye to Kafka.
func (g *gatewayProcess) kill() {
	if g.cmd == nil {
		return
	}
	g.cmd.Process.Signal(syscall.SIGKILL)
	<-g.exited
	g.cmd = nil
}

// TestGatewayRestartLosesNothing SIGKILLs the gateway, twice, while a
// publisher and a subscriber stream through it, and starts it again on
// the same address: every batch is answered as published, every one of
// them is in Kafka, and the subscriber receives every one of them.
func TestGatewayRestartLosesNothing(t *testing.T) {
	bin := testkit.Binary(t, "./cmd/databus")
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 3)
		// 6s: the shortest session a real broker allows by default; a
		// group waits that long for the member a SIGKILL left behind.
		g := startGatewayProcess(t, bin, "--brokers", strings.Join(k.Brokers, ","), "--session-timeout", "6s", "--commit-interval", "200ms")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c := dial(t, g.addr)

		var mu sync.Mutex
		received := map[int]bool{}
		maxReceived := -1
		sctx, stopSub := context.WithCancel(ctx)
		defer stopSub()
		subEnded := make(chan error, 1)
		sc := dial(t, g.addr)
		go func() {
			subEnded <- sc.Subscribe(sctx, topic, depstest.Group(t), func(_ context.Context, ds []databus.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				for _, d := range ds {
					n, _ := strconv.Atoi(string(d.Key))
					received[n] = true
					maxReceived = max(maxReceived, n)
				}
				return nil
			})
		}()

		pub, err := c.NewPublisher(ctx, topic, databus.MaxInflight(8))
		if err != nil {
			t.Fatal(err)
		}
		acked := map[int]bool{}
		var failed []error
		var next atomic.Int64 // the next message's number
		var wg sync.WaitGroup
		var pubErr error // PublishAsync's, which ends the publishing
		stopPub := make(chan struct{})
		pubDone := make(chan struct{})
		var stopOnce sync.Once
		stopPublishing := func() {
			stopOnce.Do(func() { close(stopPub) })
			<-pubDone
		}
		defer func() {
			cancel() // unblocks a PublishAsync waiting for room
			stopPublishing()
		}()
		go func() {
			defer close(pubDone)
			// About 2,000 messages/s: the subscriber keeps up under -race.
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stopPub:
					return
				case <-tick.C:
				}
				from := int(next.Add(10) - 10)
				wg.Add(1)
				if err := pub.PublishAsync(ctx, msgs(from, 10), func(err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed = append(failed, err)
						return
					}
					for i := range 10 {
						acked[from+i] = true
					}
				}); err != nil {
					wg.Done()
					mu.Lock()
					pubErr = err
					mu.Unlock()
					return
				}
			}
		}()

		// Each kill lands while messages flow both ways: after the
		// subscriber received some published since the last restart (so
		// the group settled again: a kill in the middle of a rebalance is
		// another test).
		for kill := range 2 {
			mark := int(next.Load())
			testkit.EventuallyNil(t, 60*time.Second, fmt.Sprintf("messages flow before kill %d", kill+1), func() error {
				mu.Lock()
				defer mu.Unlock()
				if maxReceived < mark+200 {
					return fmt.Errorf("the subscriber's last message is %d, want past %d", maxReceived, mark+200)
				}
				return nil
			})
			pid := g.cmd.Process.Pid
			g.kill()
			g.start()
			t.Logf("kill %d: SIGKILLed gateway pid %d at message %d, started pid %d", kill+1, pid, next.Load(), g.cmd.Process.Pid)
		}
		mark := int(next.Load())
		testkit.EventuallyNil(t, 60*time.Second, "messages flow after the last restart", func() error {
			mu.Lock()
			defer mu.Unlock()
			if maxReceived < mark+200 {
				return fmt.Errorf("the subscriber's last message is %d, want past %d", maxReceived, mark+200)
			}
			return nil
		})
		stopPublishing()
		wg.Wait()
		pub.Close()
		sent := int(next.Load())

		mu.Lock()
		if pubErr != nil {
			t.Fatalf("publishing stopped: %v", pubErr)
		}
		nAcked, nFailed := len(acked), len(failed)
		var firstFail error
		if nFailed > 0 {
			firstFail = failed[0]
		}
		mu.Unlock()
		if nFailed > 0 || nAcked != sent {
			t.Fatalf("%d of %d messages answered as published, %d batches failed (first: %v): the publisher must ride through a SIGKILL", nAcked, sent, nFailed, firstFail)
		}
		testkit.EventuallyNil(t, 90*time.Second, "the subscriber receives every acked message", func() error {
			select {
			case err := <-subEnded:
				t.Fatalf("Subscribe returned: %v", err)
			default:
			}
			mu.Lock()
			defer mu.Unlock()
			missing, first := 0, -1
			for n := range acked {
				if !received[n] {
					if missing == 0 || n < first {
						first = n
					}
					missing++
				}
			}
			if missing > 0 {
				return fmt.Errorf("%d of %d acked messages not received (first: %d)", missing, len(acked), first)
			}
			return nil
		})

		// And straight from Kafka: every acked message is stored.
		cl, err := k.NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		stored := map[string]bool{}
		testkit.EventuallyNil(t, 30*time.Second, "every acked message in Kafka", func() error {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { stored[string(r.Key)] = true })
			pcancel()
			lost := 0
			for n := range acked {
				if !stored[strconv.Itoa(n)] {
					lost++
				}
			}
			if lost > 0 {
				return fmt.Errorf("%d of %d acked messages missing", lost, len(acked))
			}
			return nil
		})
		t.Logf("%d messages published across 2 SIGKILLs: all acked, all in Kafka (%d distinct stored), all received", nAcked, len(stored))
	})
}

// kafkaFor returns the test binary's shared Kafka of kind.
func kafkaFor(t *testing.T, kind deps.KafkaKind) *deps.Kafka { return depstest.Kafka(t, kind) }
