package gateway_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// rawSub opens a subscribe stream of the raw API (nacks are not in the
// Go client here) with metadata md; it ends when the test does.
func rawSub(t *testing.T, addr string, md ...string) (databusv1.DataBus_SubscribeClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return rawSubscribe(t, ctx, addr, md...), cancel
}

// nackTopic publishes msgs(0, n) to a new one-partition topic through a
// gateway of cfg on k's brokers, and returns the gateway, the topic and a
// group of the test's own.
func nackTopic(t *testing.T, k *deps.Kafka, cfg gateway.Config, n int) (*gw, string, string) {
	t.Helper()
	topic := newTopic(t, k, 1)
	cfg.Brokers = k.Brokers
	g := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g.publishAll(t, ctx, topic, n)
	return g, topic, depstest.Group(t)
}

// nackDelivery is one message as a test's subscriber saw it.
type nackDelivery struct {
	offset int64
	count  uint32
	at     time.Time
}

// nackLog records what a raw subscriber received, per offset of a
// one-partition topic, safe for concurrent use.
type nackLog struct {
	mu   sync.Mutex
	seen map[int64][]nackDelivery
}

func (l *nackLog) add(m *databusv1.ConsumedMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[int64][]nackDelivery{}
	}
	l.seen[m.Offset] = append(l.seen[m.Offset], nackDelivery{m.Offset, m.DeliveryCount, time.Now()})
}

func (l *nackLog) get(o int64) []nackDelivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]nackDelivery(nil), l.seen[o]...)
}

func (l *nackLog) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// duplicates counts the deliveries of offsets other than skip beyond
// their first.
func (l *nackLog) duplicates(skip int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for o, ds := range l.seen {
		if o != skip {
			n += len(ds) - 1
		}
	}
	return n
}

// consume receives from s until it ends, recording each message in l,
// and answers it with decide's nack (nil: ack). It returns the error that
// ended the stream.
func consumeNacking(s databusv1.DataBus_SubscribeClient, l *nackLog, decide func(m *databusv1.ConsumedMessage) *databusv1.Nack) <-chan error {
	ended := make(chan error, 1)
	go func() {
		for {
			resp, err := s.Recv()
			if err != nil {
				ended <- err
				return
			}
			req := &databusv1.SubscribeRequest{}
			for _, m := range resp.Messages {
				l.add(m)
				if n := decide(m); n != nil {
					req.Nacks = append(req.Nacks, n)
				} else {
					req.Acks = append(req.Acks, &databusv1.Ack{Partition: m.Partition, Offset: m.Offset})
				}
			}
			if len(req.Acks)+len(req.Nacks) > 0 {
				if err := s.Send(req); err != nil {
					ended <- err
					return
				}
			}
		}
	}()
	return ended
}

// committed reads group's committed offset of partition 0 of topic.
func committed(t *testing.T, k *deps.Kafka, topic, group string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(depstest.Client(t, k)).FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	if o, ok := offs.Lookup(topic, 0); ok {
		return o.At
	}
	return -1
}

func TestNackRedeliversAfterDelay(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		g, topic, group := nackTopic(t, k, gateway.Config{CommitInterval: 100 * time.Millisecond}, 100)
		s, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
		const delay = 2 * time.Second
		var nackedAt time.Time
		var mu sync.Mutex
		l := &nackLog{}
		ended := consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			if m.Offset == 0 && m.DeliveryCount == 1 {
				mu.Lock()
				nackedAt = time.Now()
				mu.Unlock()
				return &databusv1.Nack{Partition: 0, Offset: 0, DelayMs: uint32(delay.Milliseconds()), Reason: "not now"}
			}
			return nil
		})
		testkit.EventuallyNil(t, time.Minute, "offset 0 redelivered", func() error {
			select {
			case err := <-ended:
				t.Fatalf("stream ended: %v", err)
			default:
			}
			if n := len(l.get(0)); n < 2 {
				return fmt.Errorf("offset 0 delivered %d times, %d offsets seen", n, l.distinct())
			}
			return nil
		})
		ds := l.get(0)
		mu.Lock()
		waited := ds[1].at.Sub(nackedAt)
		mu.Unlock()
		if ds[0].count != 1 || ds[1].count != 2 {
			t.Errorf("delivery counts of offset 0: %d then %d, want 1 then 2", ds[0].count, ds[1].count)
		}
		if waited < delay-200*time.Millisecond {
			t.Errorf("redelivered %v after the nack, before its delay of %v", waited, delay)
		}
		// The later messages flowed meanwhile: all 99 came before it.
		before := 0
		for o := int64(1); o < 100; o++ {
			if d := l.get(o); len(d) > 0 && d[0].at.Before(ds[1].at) {
				before++
			}
		}
		if before != 99 {
			t.Errorf("%d of the 99 later messages arrived before the redelivery, want all", before)
		}
		testkit.Eventually(t, time.Minute, "the commit passes everything", func() bool { return committed(t, k, topic, group) == 100 })
		lost := 100 - l.distinct()
		dups := l.duplicates(0)
		t.Logf("nack at %v, redelivered after %v; %d of 99 before it; lost %d, duplicates %d", delay, waited.Round(time.Millisecond), before, lost, dups)
		if lost != 0 || dups != 0 {
			t.Errorf("lost %d, duplicates %d: want 0 and 0", lost, dups)
		}
	})
}

func TestCommitNeverPassesNack(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		g, topic, group := nackTopic(t, k, gateway.Config{CommitInterval: 100 * time.Millisecond}, 50)
		s, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
		const k7 = 7
		l := &nackLog{}
		consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			if m.Offset == k7 {
				return &databusv1.Nack{Partition: 0, Offset: k7, DelayMs: 10 * 60 * 1000}
			}
			return nil
		})
		testkit.Eventually(t, time.Minute, "all 50 delivered", func() bool { return l.distinct() == 50 })
		// Everything else is acked: the commit point reaches the nacked
		// message and stays there over several commit intervals.
		testkit.Eventually(t, time.Minute, "a commit up to the nacked offset", func() bool { return committed(t, k, topic, group) >= k7 })
		time.Sleep(500 * time.Millisecond) // five commit intervals: a wrong commit would land
		if c := committed(t, k, topic, group); c != k7 {
			t.Fatalf("committed offset %d, want %d (the nacked message's)", c, k7)
		}
	})
}

// TestDeadLetterAfterMaxDeliveries: a message nacked at every delivery is
// in the dead-letter topic once, after 3 deliveries, with its own key,
// value and headers and the dead-letter headers; the group's commit then
// passes it.
func TestDeadLetterAfterMaxDeliveries(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		g, topic, group := nackTopic(t, k, gateway.Config{CommitInterval: 100 * time.Millisecond}, 20)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dlq := topic + databusv1.DeadLetterSuffix
		if err := k.CreateTopics(ctx, 1, dlq); err != nil {
			t.Fatal(err)
		}
		s, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group, databusv1.MDMaxDeliveries, "3")
		const poison = 7
		l := &nackLog{}
		ended := consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			if m.Offset == poison {
				return &databusv1.Nack{Partition: 0, Offset: poison, Reason: "poison " + strconv.Itoa(int(m.DeliveryCount))}
			}
			return nil
		})
		testkit.EventuallyNil(t, time.Minute, "the commit passes the dead letter", func() error {
			select {
			case err := <-ended:
				t.Fatalf("stream ended: %v", err)
			default:
			}
			if c := committed(t, k, topic, group); c != 20 {
				return fmt.Errorf("committed %d, poison delivered %d times", c, len(l.get(poison)))
			}
			return nil
		})
		ds := l.get(poison)
		if len(ds) != 3 || ds[0].count != 1 || ds[1].count != 2 || ds[2].count != 3 {
			t.Errorf("the poison message's deliveries: %+v, want counts 1, 2, 3", ds)
		}
		letters := readTopic(t, k, dlq)
		if len(letters) != 1 {
			t.Fatalf("%d dead letters, want 1", len(letters))
		}
		dl := letters[0]
		want := map[string]string{
			"seq":                             "7",
			databusv1.HeaderOriginalTopic:     topic,
			databusv1.HeaderOriginalPartition: "0",
			databusv1.HeaderOriginalOffset:    "7",
			databusv1.HeaderDeliveryCount:     "3",
			databusv1.HeaderNackReason:        "poison 3",
			databusv1.HeaderConsumerGroup:     group,
		}
		got := map[string]string{}
		for _, h := range dl.Headers {
			got[h.Key] = string(h.Value)
		}
		for key, v := range want {
			if got[key] != v {
				t.Errorf("dead letter header %s = %q, want %q", key, got[key], v)
			}
		}
		if string(dl.Key) != "7" || string(dl.Value) != "value-7" {
			t.Errorf("dead letter key %q value %q, want the original's", dl.Key, dl.Value)
		}
		lost := 20 - l.distinct()
		dups := l.duplicates(poison)
		t.Logf("poison delivered %d times, %d dead letter; lost %d, duplicates %d outside it", len(ds), len(letters), lost, dups)
		if lost != 0 || dups != 0 {
			t.Errorf("lost %d, duplicates %d: want 0 and 0", lost, dups)
		}
	})
}

// readTopic reads every record of topic (one partition) as it is now.
func readTopic(t *testing.T, k *deps.Kafka, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(depstest.Client(t, k))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	if end.Offset == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for int64(len(out)) < end.Offset {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %d of %d records: %v", topic, len(out), end.Offset, err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func TestNackBounds(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	reg := prometheus.NewRegistry()
	g, topic, _ := nackTopic(t, k, gateway.Config{MaxNackDelay: 100 * time.Millisecond, MaxPendingRetries: 3, MaxDeliveries: 5, Registry: reg}, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("delay cut to --max-nack-delay", func(t *testing.T) {
		s, end := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, depstest.Group(t))
		defer end()
		l := &nackLog{}
		consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			if m.Offset == 0 && m.DeliveryCount == 1 {
				return &databusv1.Nack{Offset: 0, DelayMs: 3600 * 1000} // an hour
			}
			return nil
		})
		testkit.Eventually(t, time.Minute, "the nacked message back before its hour", func() bool { return len(l.get(0)) == 2 })
		if n := testkit.MetricSum(t, reg, "databus_nack_delays_cut_total", nil); n != 1 {
			t.Errorf("databus_nack_delays_cut_total = %v, want 1", n)
		}
	})
	t.Run("--max-pending-retries", func(t *testing.T) {
		s, end := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, depstest.Group(t))
		defer end()
		l := &nackLog{}
		ended := consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			return &databusv1.Nack{Offset: m.Offset, DelayMs: 60 * 1000}
		})
		select {
		case err := <-ended:
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-pending-retries") {
				t.Fatalf("stream ended with %v, want ResourceExhausted naming --max-pending-retries", err)
			}
		case <-ctx.Done():
			t.Fatal("4 nacks past --max-pending-retries 3: the stream did not end")
		}
	})
	for _, tc := range []struct {
		name string
		md   []string
		code codes.Code
		want string
	}{
		{"zero deliveries", []string{databusv1.MDMaxDeliveries, "0"}, codes.InvalidArgument, databusv1.MDMaxDeliveries},
		{"above --max-deliveries", []string{databusv1.MDMaxDeliveries, "6"}, codes.InvalidArgument, "--max-deliveries"},
		{"not a number", []string{databusv1.MDMaxDeliveries, "many"}, codes.InvalidArgument, databusv1.MDMaxDeliveries},
		{"topic without deliveries", []string{databusv1.MDDeadLetterTopic, "x"}, codes.InvalidArgument, databusv1.MDMaxDeliveries},
		{"bad topic name", []string{databusv1.MDMaxDeliveries, "2", databusv1.MDDeadLetterTopic, "no/slash"}, codes.InvalidArgument, databusv1.MDDeadLetterTopic},
		{"missing dead-letter topic", []string{databusv1.MDMaxDeliveries, "2"}, codes.FailedPrecondition, topic + databusv1.DeadLetterSuffix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := rawSub(t, g.addr, append([]string{gateway.MDTopic, topic, gateway.MDGroup, depstest.Group(t)}, tc.md...)...)
			_, err := s.Recv()
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %s naming %s", err, tc.code, tc.want)
			}
		})
	}
}

// TestNackedMessageMovesWithItsPartition: a stream ends with a message
// nacked and one unacked; the group's other stream on the gateway takes
// the partition and gets the unacked one again at once, and the nacked
// one after its delay, both with delivery count 2.
func TestNackedMessageMovesWithItsPartition(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	reg := prometheus.NewRegistry()
	g, topic, group := nackTopic(t, k, gateway.Config{Registry: reg}, 10)
	a, endA := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
	la := &nackLog{}
	const delay = 1500 * time.Millisecond
	var nackedAt atomic.Int64 // Unix ns
	consumeNacking(a, la, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
		switch m.Offset {
		case 0:
			nackedAt.Store(time.Now().UnixNano())
			return &databusv1.Nack{Offset: 0, DelayMs: uint32(delay.Milliseconds())}
		case 1:
			return &databusv1.Nack{Offset: 999} // not held: ignored, and 1 stays unacked
		}
		return nil
	})
	testkit.Eventually(t, time.Minute, "all 10 delivered to the first stream", func() bool { return la.distinct() == 10 })
	b, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
	lb := &nackLog{}
	consumeNacking(b, lb, func(*databusv1.ConsumedMessage) *databusv1.Nack { return nil })
	// Once b is attached, a's end moves the partition to it (not the
	// member's end, which would hand it to Kafka).
	testkit.Eventually(t, time.Minute, "two subscribe streams", func() bool {
		return testkit.MetricSum(t, reg, "databus_streams", map[string]string{"kind": "subscribe"}) == 2
	})
	endA()
	testkit.Eventually(t, time.Minute, "the nacked message on the second stream", func() bool { return len(lb.get(0)) > 0 })
	d0, d1 := lb.get(0), lb.get(1)
	if len(d1) == 0 || d1[0].count != 2 {
		t.Errorf("the unacked message on the second stream: %+v, want delivery count 2", d1)
	}
	if len(d0) != 1 || d0[0].count != 2 {
		t.Fatalf("the nacked message on the second stream: %+v, want once, delivery count 2", d0)
	}
	if n := testkit.MetricSum(t, reg, "databus_nacks_total", map[string]string{"result": "ignored"}); n != 1 {
		t.Errorf("databus_nacks_total{result=ignored} = %v, want 1 (the nack of an offset not held)", n)
	}
	if waited := d0[0].at.Sub(time.Unix(0, nackedAt.Load())); waited < delay-200*time.Millisecond {
		t.Errorf("the nacked message came back %v after its nack, before its delay of %v", waited, delay)
	}
}

// TestKilledGatewayRedeliversNacked SIGKILLs a gateway holding nacked
// messages for a 10-minute redelivery, and starts it again: the group's
// committed offset stopped at the first of them, so all are delivered
// again at once.
func TestKilledGatewayRedeliversNacked(t *testing.T) {
	bin := testkit.Binary(t, "./cmd/databus")
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 1)
		gp := startGatewayProcess(t, bin, "--brokers", strings.Join(k.Brokers, ","), "--session-timeout", "6s", "--commit-interval", "200ms")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		w := &gw{addr: gp.addr}
		w.publishAll(t, ctx, topic, 50)
		group := depstest.Group(t)
		nacked := func(o int64) bool { return o >= 10 && o < 20 }
		s, _ := rawSub(t, gp.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
		before := &nackLog{}
		consumeNacking(s, before, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
			if nacked(m.Offset) {
				return &databusv1.Nack{Offset: m.Offset, DelayMs: 10 * 60 * 1000}
			}
			return nil
		})
		testkit.Eventually(t, time.Minute, "all 50 delivered", func() bool { return before.distinct() == 50 })
		testkit.Eventually(t, time.Minute, "a commit up to the first nacked offset", func() bool { return committed(t, k, topic, group) == 10 })
		gp.kill()
		gp.start()
		s2, _ := rawSub(t, gp.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
		after := &nackLog{}
		consumeNacking(s2, after, func(*databusv1.ConsumedMessage) *databusv1.Nack { return nil })
		testkit.Eventually(t, time.Minute, "the commit passes everything after the restart", func() bool { return committed(t, k, topic, group) == 50 })
		lost, dups := 0, 0
		for o := int64(0); o < 50; o++ {
			n := len(after.get(o))
			switch {
			case nacked(o) && n == 0:
				lost++
			case !nacked(o):
				dups += n // acked before the kill: delivered again from the commit point
			}
		}
		t.Logf("10 nacked when killed: lost %d; acked ones delivered again after the restart: %d (at least once)", lost, dups)
		if lost != 0 {
			t.Errorf("%d nacked messages lost over the SIGKILL", lost)
		}
	})
}

// TestDeadLetterTopicNeedsPublishToken: with --tokens, a dead-letter
// topic named in metadata must be one the token may publish to.
func TestDeadLetterTopicNeedsPublishToken(t *testing.T) {
	ts, err := gateway.ParseTokens(strings.NewReader("token-a publish=orders.dlq subscribe=orders groups=billing\n"))
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.Start(t, gateway.Config{Echo: true}, gateway.ServerOptions{Auth: &gateway.Auth{Tokens: ts}})
	for _, tc := range []struct {
		dlq  string
		code codes.Code
		want string
	}{
		{"payments", codes.PermissionDenied, `"payments"`},
		{"orders.dlq", codes.FailedPrecondition, "echo"}, // past the check, an echo gateway refuses subscriptions
	} {
		s, _ := rawSub(t, addr, "authorization", "Bearer token-a", gateway.MDTopic, "orders", gateway.MDGroup, "billing",
			databusv1.MDMaxDeliveries, "3", databusv1.MDDeadLetterTopic, tc.dlq)
		if _, err := s.Recv(); status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dead-letter topic %s: %v, want %s naming %s", tc.dlq, err, tc.code, tc.want)
		}
	}
}

// TestDeadLetterWriteFailureIsRetried: a dead letter that Kafka does not
// store (its topic deleted after the stream opened) is written again
// after a backoff, its message held meanwhile: once the topic is back,
// it is stored once and the commit passes it.
func TestDeadLetterWriteFailureIsRetried(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	reg := prometheus.NewRegistry()
	g, topic, group := nackTopic(t, k, gateway.Config{CommitInterval: 100 * time.Millisecond, Registry: reg}, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dlq := topic + databusv1.DeadLetterSuffix
	if err := k.CreateTopics(ctx, 1, dlq); err != nil {
		t.Fatal(err)
	}
	s, _ := rawSub(t, g.addr, gateway.MDTopic, topic, gateway.MDGroup, group, databusv1.MDMaxDeliveries, "1")
	if err := k.DeleteTopics(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	l := &nackLog{}
	consumeNacking(s, l, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
		if m.Offset == 2 {
			return &databusv1.Nack{Offset: 2, Reason: "poison"}
		}
		return nil
	})
	testkit.Eventually(t, time.Minute, "a failed dead-letter write", func() bool {
		return testkit.MetricSum(t, reg, "databus_dead_letters_total", map[string]string{"result": "error"}) >= 1
	})
	if c := committed(t, k, topic, group); c > 2 {
		t.Fatalf("committed %d past the message whose dead letter failed", c)
	}
	if err := k.CreateTopics(ctx, 1, dlq); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the commit passes the dead letter", func() bool { return committed(t, k, topic, group) == 5 })
	if n := len(readTopic(t, k, dlq)); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
	if n := len(l.get(2)); n != 1 {
		t.Errorf("the poison message delivered %d times, want 1 (max-deliveries 1)", n)
	}
}

// TestRevokedPartitionDropsItsRetries: a partition that a rebalance moves
// to another gateway leaves its retries behind: the old gateway holds
// none of them any more, and the new one delivers its nacked messages
// from the committed offset, at count 1.
func TestRevokedPartitionDropsItsRetries(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := newTopic(t, k, 2)
	regA := prometheus.NewRegistry()
	a := startGateway(t, gateway.Config{Brokers: k.Brokers, Registry: regA})
	b := startGateway(t, gateway.Config{Brokers: k.Brokers})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const total = 20
	a.publishAll(t, ctx, topic, total)
	group := depstest.Group(t)
	sa, _ := rawSub(t, a.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
	var la nackLogs
	consumeParts(sa, &la, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
		return &databusv1.Nack{Partition: m.Partition, Offset: m.Offset, DelayMs: 10 * 60 * 1000}
	})
	pending := func() int { return int(testkit.MetricSum(t, regA, "databus_retries_pending", nil)) }
	testkit.Eventually(t, time.Minute, "all nacked on gateway A", func() bool { return pending() == total })
	sb, _ := rawSub(t, b.addr, gateway.MDTopic, topic, gateway.MDGroup, group)
	var lb nackLogs
	consumeParts(sb, &lb, func(*databusv1.ConsumedMessage) *databusv1.Nack { return nil })
	testkit.EventuallyNil(t, time.Minute, "a partition moved to gateway B with its nacked messages", func() error {
		got := lb.total()
		if got == 0 || pending() != total-got {
			return fmt.Errorf("gateway B received %d, gateway A holds %d retries", got, pending())
		}
		return nil
	})
	for _, c := range lb.counts() {
		if c != 1 {
			t.Fatalf("delivery count %d on gateway B, want 1 (counts stay with the gateway)", c)
		}
	}
}

// nackLogs is a nackLog per partition.
type nackLogs struct {
	mu sync.Mutex
	l  map[int32]*nackLog
}

func (ls *nackLogs) of(p int32) *nackLog {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.l == nil {
		ls.l = map[int32]*nackLog{}
	}
	if ls.l[p] == nil {
		ls.l[p] = &nackLog{}
	}
	return ls.l[p]
}

func (ls *nackLogs) total() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	n := 0
	for _, l := range ls.l {
		n += l.distinct()
	}
	return n
}

func (ls *nackLogs) counts() []uint32 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []uint32
	for _, l := range ls.l {
		l.mu.Lock()
		for _, ds := range l.seen {
			for _, d := range ds {
				out = append(out, d.count)
			}
		}
		l.mu.Unlock()
	}
	return out
}

// consumeParts is consume over several partitions.
func consumeParts(s databusv1.DataBus_SubscribeClient, ls *nackLogs, decide func(m *databusv1.ConsumedMessage) *databusv1.Nack) <-chan error {
	var all nackLog // consume's own record, unused: ls keeps them by partition
	return consumeNacking(s, &all, func(m *databusv1.ConsumedMessage) *databusv1.Nack {
		ls.of(m.Partition).add(m)
		return decide(m)
	})
}
