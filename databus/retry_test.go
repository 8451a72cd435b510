package databus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// handled counts what a handler saw: per key, its deliveries' counts in
// the order they came, and how many times it succeeded.
type handled struct {
	mu     sync.Mutex
	counts map[string][]int
	ok     map[string]int
}

func newHandled() *handled { return &handled{counts: map[string][]int{}, ok: map[string]int{}} }

// handle records d and fails it while fail says so.
func (h *handled) handle(d databus.Delivery, fail func(key string, deliveries int) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := string(d.Key)
	h.counts[key] = append(h.counts[key], d.DeliveryCount)
	if err := fail(key, d.DeliveryCount); err != nil {
		return err
	}
	h.ok[key]++
	return nil
}

// check says how many of n keys (0..n-1 and except) were never handled
// with success, and how many more than once, and returns an error while
// any was never handled.
func (h *handled) check(n int, except string) (lost, dup int, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range n {
		key := strconv.Itoa(i)
		if key == except {
			continue
		}
		switch ok := h.ok[key]; {
		case ok == 0:
			lost++
		case ok > 1:
			dup++
		}
	}
	if lost > 0 {
		var missing []string
		for i := range n {
			if key := strconv.Itoa(i); key != except && h.ok[key] == 0 {
				missing = append(missing, fmt.Sprintf("%s (delivered with counts %v)", key, h.counts[key]))
			}
		}
		err = fmt.Errorf("%d of %d messages not handled yet: %s", lost, n, strings.Join(missing, ", "))
	}
	return lost, dup, err
}

func (h *handled) deliveries(key string) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.counts[key]...)
}

// firstAfter checks that a fresh member of group starts after every
// message published so far: it publishes one more, and the first message
// the member gets must be that one (else the commit stopped short).
func firstAfter(ctx context.Context, t *testing.T, addr, topic, group string) {
	t.Helper()
	if err := publisher(ctx, t, addr, topic).Publish(ctx, databus.Message{Key: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	sub, err := dial(t, addr).OpenSubscription(ctx, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for {
		b, err := sub.Recv()
		if err != nil {
			t.Fatalf("a fresh member: %v", err)
		}
		if len(b.Messages) > 0 {
			if key := string(b.Messages[0].Key); key != "after" {
				t.Fatalf("a fresh member got message %s first, want the one published last: the commit stopped short", key)
			}
			return
		}
	}
}

// retryRun is n messages, keys 0 to n-1, published to a topic of two
// partitions through a gateway of its own, for group to consume.
type retryRun struct {
	ctx                context.Context
	addr, topic, group string
	n                  int
	h                  *handled
}

func newRetryRun(t *testing.T, k *deps.Kafka, n int) *retryRun {
	t.Helper()
	topic := depstest.Topic(t, k, 2)
	w := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	if err := publisher(ctx, t, w.addr, topic).Publish(ctx, msgs(0, n)...); err != nil {
		t.Fatal(err)
	}
	return &retryRun{ctx: ctx, addr: w.addr, topic: topic, group: depstest.Group(t), n: n, h: newHandled()}
}

// consume runs subscribe (Subscribe or SubscribeEach on a client of the
// gateway) until every message but except was handled with success and
// then wait returned, checks it returns nil when its context ends, and
// returns how many messages were not handled (0) and how many more than
// once.
func (r *retryRun) consume(t *testing.T, except string, wait func(), subscribe func(context.Context, *databus.Client) error) (lost, dup int) {
	t.Helper()
	ctx, stop := context.WithCancel(r.ctx)
	ended := make(chan error, 1)
	c := dial(t, r.addr)
	go func() { ended <- subscribe(ctx, c) }()
	testkit.EventuallyNil(t, 60*time.Second, "every message handled", func() (err error) {
		lost, dup, err = r.h.check(r.n, except)
		return err
	})
	wait()
	stop()
	if err := <-ended; err != nil {
		t.Fatalf("subscribing returned %v, want nil when its context ended", err)
	}
	return lost, dup
}

// TestSubscribeEachRetries: a handler that fails one message twice sees
// it three times, with DeliveryCount 1, 2 and 3, while every other
// message is handled once; the stream goes on, and the group's commit
// passes the message once it succeeded.
func TestSubscribeEachRetries(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		r := newRetryRun(t, k, 50)
		lost, dup := r.consume(t, "", func() {}, func(ctx context.Context, c *databus.Client) error {
			return c.SubscribeEach(ctx, r.topic, r.group, func(_ context.Context, d databus.Delivery) error {
				return r.h.handle(d, func(key string, deliveries int) error {
					if key == "7" && deliveries < 3 {
						return errors.New("not yet")
					}
					return nil
				})
			}, databus.RetryDelay(10*time.Millisecond, 50*time.Millisecond))
		})
		got := r.h.deliveries("7")
		t.Logf("%d messages: %d lost, %d handled more than once; message 7 delivered with counts %v", r.n, lost, dup, got)
		if dup > 0 || fmt.Sprint(got) != "[1 2 3]" {
			t.Fatalf("%d messages handled more than once, message 7 delivered with counts %v: want 0, and [1 2 3]", dup, got)
		}
		firstAfter(r.ctx, t, r.addr, r.topic, r.group)
	})
}

// TestSubscribeRetriesAFailedBatch: a batch handler's error nacks the
// batch, which comes again with its delivery counts one higher; every
// message is handled with success once, and the commit passes them all.
func TestSubscribeRetriesAFailedBatch(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		r := newRetryRun(t, k, 50)
		failures := 0
		lost, dup := r.consume(t, "", func() {}, func(ctx context.Context, c *databus.Client) error {
			return c.Subscribe(ctx, r.topic, r.group, func(_ context.Context, ds []databus.Delivery) error {
				for _, d := range ds {
					if string(d.Key) == "7" && d.DeliveryCount < 2 {
						failures++
						return errors.New("not yet")
					}
				}
				for _, d := range ds {
					r.h.handle(d, func(string, int) error { return nil })
				}
				return nil
			}, databus.BatchSize(10), databus.RetryDelay(10*time.Millisecond, 50*time.Millisecond))
		})
		got := r.h.deliveries("7")
		t.Logf("%d messages: %d lost, %d handled more than once; the batch of message 7 failed %d times, then passed with counts %v", r.n, lost, dup, failures, got)
		if dup > 0 || failures != 1 || fmt.Sprint(got) != "[2]" {
			t.Fatalf("%d handled more than once, %d failures, message 7 handled with counts %v: want 0, 1, [2]", dup, failures, got)
		}
		firstAfter(r.ctx, t, r.addr, r.topic, r.group)
	})
}

// TestDeadLetter: with DeadLetter(3) and DeadLetterTopic, a message whose
// handler always fails is handled three times, then is in the named
// dead-letter topic once, with its key, value and the six headers that
// say where it came from and why; every other message is handled once,
// and the group's commit passes the dead letter.
func TestDeadLetter(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		r := newRetryRun(t, k, 30)
		dlq := depstest.Topic(t, k, 1)
		var stored []*kgo.Record
		lost, dup := r.consume(t, "13", func() { stored = storedRecords(t, k, dlq, "13") }, func(ctx context.Context, c *databus.Client) error {
			return c.SubscribeEach(ctx, r.topic, r.group, func(_ context.Context, d databus.Delivery) error {
				return r.h.handle(d, func(key string, _ int) error {
					if key == "13" {
						return errors.New("poison: no such customer")
					}
					return nil
				})
			}, databus.DeadLetter(3), databus.DeadLetterTopic(dlq), databus.RetryDelay(10*time.Millisecond, 50*time.Millisecond))
		})
		got := r.h.deliveries("13")
		t.Logf("%d messages: %d lost, %d handled more than once; the poison message delivered with counts %v, %d copies in the dead-letter topic", r.n, lost, dup, got, len(stored))
		if dup > 0 || fmt.Sprint(got) != "[1 2 3]" || len(stored) != 1 {
			t.Fatalf("%d handled more than once, poison delivered with counts %v, %d dead letters: want 0, [1 2 3], 1", dup, got, len(stored))
		}
		rec := stored[0]
		headers := map[string]string{}
		for _, h := range rec.Headers {
			headers[h.Key] = string(h.Value)
		}
		for key, want := range map[string]string{
			databusv1.HeaderOriginalTopic: r.topic,
			databusv1.HeaderDeliveryCount: "3",
			databusv1.HeaderNackReason:    "poison: no such customer",
			databusv1.HeaderConsumerGroup: r.group,
		} {
			if headers[key] != want {
				t.Errorf("dead letter header %s = %q, want %q", key, headers[key], want)
			}
		}
		for _, key := range []string{databusv1.HeaderOriginalPartition, databusv1.HeaderOriginalOffset} {
			if _, err := strconv.ParseInt(headers[key], 10, 64); err != nil {
				t.Errorf("dead letter header %s = %q, want a decimal number", key, headers[key])
			}
		}
		if string(rec.Value) != "v" {
			t.Errorf("dead letter value %q, want the original's %q", rec.Value, "v")
		}
		firstAfter(r.ctx, t, r.addr, r.topic, r.group)
	})
}

// storedRecords reads topic, straight from Kafka, until it has a record
// of key and nothing more comes; it returns the records of key.
func storedRecords(t *testing.T, k *deps.Kafka, topic, key string) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	readTopic(t, k, topic, "the dead letter in its topic", func(recs []*kgo.Record) error {
		out = out[:0]
		for _, r := range recs {
			if string(r.Key) == key {
				out = append(out, r)
			}
		}
		if len(out) == 0 {
			return fmt.Errorf("no record of key %s yet", key)
		}
		return nil
	})
	return out
}

// TestSubscribeEachRetriesSeveral: a handler that fails every third
// message once, so that one partition has several retries due at
// different times (each nack its own jittered delay): each comes again,
// 0 lost, 0 handled twice.
func TestSubscribeEachRetriesSeveral(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		r := newRetryRun(t, k, 60)
		lost, dup := r.consume(t, "", func() {}, func(ctx context.Context, c *databus.Client) error {
			return c.SubscribeEach(ctx, r.topic, r.group, func(_ context.Context, d databus.Delivery) error {
				return r.h.handle(d, func(key string, deliveries int) error {
					if d.Offset%3 == 0 && deliveries < 2 {
						return errors.New("not yet")
					}
					return nil
				})
			}, databus.BatchSize(10), databus.RetryDelay(10*time.Millisecond, 50*time.Millisecond))
		})
		if lost != 0 || dup != 0 {
			t.Fatalf("%d lost, %d handled twice; want 0 and 0", lost, dup)
		}
	})
}
