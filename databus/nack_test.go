package databus_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
)

// TestDeadLetterMetadata: DeadLetter and DeadLetterTopic travel as the
// stream's metadata; a stream without them carries neither key.
func TestDeadLetterMetadata(t *testing.T) {
	f, c, ctx := fakeClient(t)
	for i, tc := range []struct {
		opts         []databus.SubscribeOption
		max, dlTopic string
	}{
		{nil, "", ""},
		{[]databus.SubscribeOption{databus.DeadLetter(3)}, "3", ""},
		{[]databus.SubscribeOption{databus.DeadLetter(1), databus.DeadLetterTopic("orders.poison")}, "1", "orders.poison"},
	} {
		sub, err := c.OpenSubscription(ctx, "orders", "billing", tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		sub.Ack(databus.Delivery{}) // the stream reaches the server
		f.request(t, i)
		md := f.stream(i)
		if got := strings.Join(md.Get(databusv1.MDMaxDeliveries), ","); got != tc.max {
			t.Errorf("case %d: %s = %q, want %q", i, databusv1.MDMaxDeliveries, got, tc.max)
		}
		if got := strings.Join(md.Get(databusv1.MDDeadLetterTopic), ","); got != tc.dlTopic {
			t.Errorf("case %d: %s = %q, want %q", i, databusv1.MDDeadLetterTopic, got, tc.dlTopic)
		}
		if err := sub.Close(); err != nil {
			t.Errorf("case %d: Close: %v", i, err)
		}
	}
}

// TestSubscribeOptionsRefused: wrong retry options fail OpenSubscription,
// Subscribe and SubscribeEach at once, naming the option, and open no
// stream (Subscribe used to retry a setting it refused itself forever).
func TestSubscribeOptionsRefused(t *testing.T) {
	f, c, ctx := fakeClient(t)
	for _, tc := range []struct {
		opt  databus.SubscribeOption
		want string
	}{
		{databus.DeadLetter(-1), "DeadLetter(-1)"},
		{databus.DeadLetterTopic("dead"), "DeadLetter(0)"},
		{databus.DeadLetterTopic(""), "DeadLetter(0)"},
		{databus.RetryDelay(0, time.Second), "RetryDelay(0s, 1s)"},
		{databus.RetryDelay(time.Minute, time.Second), "RetryDelay(1m0s, 1s)"},
		{databus.CloseTimeout(0), "CloseTimeout(0s)"},
	} {
		if _, err := c.OpenSubscription(ctx, "orders", "billing", tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenSubscription with %s: %v, want an error naming it", tc.want, err)
		}
		if err := c.Subscribe(ctx, "orders", "billing", func(context.Context, []databus.Delivery) error { return nil }, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Subscribe with %s: %v, want an error naming it", tc.want, err)
		}
		if err := c.SubscribeEach(ctx, "orders", "billing", func(context.Context, databus.Delivery) error { return nil }, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SubscribeEach with %s: %v, want an error naming it", tc.want, err)
		}
	}
	if _, err := c.OpenSubscription(ctx, "orders", "billing", databus.DeadLetter(2), databus.DeadLetterTopic("")); err == nil || !strings.Contains(err.Error(), `DeadLetterTopic("")`) {
		t.Errorf("DeadLetterTopic(\"\"): %v, want an error naming it", err)
	}
	if n := f.streamCount(); n != 0 {
		t.Errorf("%d streams opened with wrong options, want 0", n)
	}
}

// TestNackWireForm: Nack sends the message's partition and offset, its
// delay rounded to milliseconds and held in a uint32, and the reason cut
// to the 1024 bytes the gateway keeps, not inside a character.
func TestNackWireForm(t *testing.T) {
	f, c, ctx := fakeClient(t)
	sub, err := c.OpenSubscription(ctx, "orders", "billing")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 1023) + "é" + "tail" // é straddles byte 1024
	for i, tc := range []struct {
		delay   time.Duration
		reason  string
		wantMs  uint32
		wantWhy string
	}{
		{1499 * time.Microsecond, "timeout", 1, "timeout"},
		{1500 * time.Microsecond, "", 2, ""},
		{-time.Second, "x", 0, "x"},
		{2000 * time.Hour, "x", math.MaxUint32, "x"},
		{0, long, 0, strings.Repeat("a", 1023)},
	} {
		d := databus.Delivery{Partition: int32(i), Offset: int64(100 + i)}
		if err := sub.Nack(d, tc.delay, tc.reason); err != nil {
			t.Fatal(err)
		}
		req := f.request(t, i)
		if len(req.Acks) != 0 || len(req.Nacks) != 1 {
			t.Fatalf("Nack sent %d acks and %d nacks, want one nack", len(req.Acks), len(req.Nacks))
		}
		n := req.Nacks[0]
		if n.Partition != d.Partition || n.Offset != d.Offset || n.DelayMs != tc.wantMs || n.Reason != tc.wantWhy || !utf8.ValidString(n.Reason) {
			t.Errorf("Nack(%v, %q) sent %d@%d delay %d ms reason %.20q (%d bytes), want %d@%d %d ms %.20q", tc.delay, tc.reason, n.Partition, n.Offset, n.DelayMs, n.Reason, len(n.Reason), d.Partition, d.Offset, tc.wantMs, tc.wantWhy)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Nack(databus.Delivery{}, 0, ""); !errors.Is(err, databus.ErrClosed) {
		t.Errorf("Nack after Close: %v, want ErrClosed", err)
	}
}

func consumed(partition int32, offset int64, deliveries uint32) *databusv1.ConsumedMessage {
	return &databusv1.ConsumedMessage{Topic: "orders", Partition: partition, Offset: offset, Key: []byte{byte('a' + offset)}, DeliveryCount: deliveries}
}

// TestSubscribeEachNacksOnError: SubscribeEach handles a batch's messages
// in order, then acks those handled and nacks those that failed, with the
// error's text and a delay that grows with their DeliveryCount, in one
// request; the stream goes on.
func TestSubscribeEachNacksOnError(t *testing.T) {
	f, c, ctx := fakeClient(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var order []int64
	ended := make(chan error, 1)
	go func() {
		ended <- c.SubscribeEach(ctx, "orders", "billing", func(_ context.Context, d databus.Delivery) error {
			order = append(order, d.Offset)
			if d.Offset%2 == 0 {
				return errors.New("broken " + string(d.Key))
			}
			return nil
		}, databus.RetryDelay(100*time.Millisecond, time.Second))
	}()
	f.deliver(consumed(0, 0, 1), consumed(0, 1, 1), consumed(0, 2, 5))
	req := f.request(t, 0)
	if len(req.Acks) != 1 || req.Acks[0].Offset != 1 {
		t.Errorf("acks %v, want offset 1 alone", req.Acks)
	}
	if len(req.Nacks) != 2 {
		t.Fatalf("nacks %v, want offsets 0 and 2", req.Nacks)
	}
	for i, want := range []struct {
		offset       int64
		minMs, maxMs uint32
		reason       string
	}{
		{0, 50, 100, "broken a"},   // first delivery: 100ms, jittered
		{2, 500, 1000, "broken c"}, // fifth: 1.6s, cut to the 1s maximum
	} {
		n := req.Nacks[i]
		if n.Offset != want.offset || n.DelayMs < want.minMs || n.DelayMs > want.maxMs || n.Reason != want.reason {
			t.Errorf("nack %d: offset %d delay %d ms reason %q, want offset %d, %d to %d ms, %q", i, n.Offset, n.DelayMs, n.Reason, want.offset, want.minMs, want.maxMs, want.reason)
		}
	}
	// The stream goes on: the next batch comes on it.
	f.deliver(consumed(0, 3, 1))
	if req := f.request(t, 1); len(req.Acks) != 1 || req.Acks[0].Offset != 3 {
		t.Errorf("second request: acks %v, want offset 3", req.Acks)
	}
	cancel()
	if err := <-ended; err != nil {
		t.Errorf("SubscribeEach returned %v when its context ended, want nil", err)
	}
	if n := f.streamCount(); n != 1 {
		t.Errorf("%d streams opened, want 1: a handler's error must not reopen the stream", n)
	}
	if got := fmt.Sprint(order); got != "[0 1 2 3]" {
		t.Errorf("handled offsets %s, want [0 1 2 3]", got)
	}
}

// TestSubscribeNacksTheBatchOnError: the batch handler's error nacks
// every message of the batch and keeps the stream. Subscribe used to end
// the stream and open a new one after a backoff: a leave and a join of
// the group, two rebalances, at each failure.
func TestSubscribeNacksTheBatchOnError(t *testing.T) {
	f, c, ctx := fakeClient(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 1)
	calls := 0
	go func() {
		ended <- c.Subscribe(ctx, "orders", "billing", func(_ context.Context, ds []databus.Delivery) error {
			if calls++; calls == 1 {
				return errors.New("database down")
			}
			return nil
		}, databus.RetryDelay(500*time.Millisecond, time.Second))
	}()
	f.deliver(consumed(0, 0, 1), consumed(1, 7, 2)) // the second one's count sets the delay: 1s
	req := f.request(t, 0)
	if len(req.Acks) != 0 || len(req.Nacks) != 2 || req.Nacks[0].Offset != 0 || req.Nacks[1].Partition != 1 || req.Nacks[1].Offset != 7 {
		t.Fatalf("after the handler's error: acks %v nacks %v, want both messages nacked", req.Acks, req.Nacks)
	}
	for _, n := range req.Nacks {
		if n.Reason != "database down" || n.DelayMs < 500 || n.DelayMs > 1000 || n.DelayMs != req.Nacks[0].DelayMs {
			t.Errorf("nack %d@%d: delay %d ms reason %q, want the batch's one delay, 500 to 1000 ms, and the handler's error", n.Partition, n.Offset, n.DelayMs, n.Reason)
		}
	}
	f.deliver(consumed(0, 0, 2))
	if req := f.request(t, 1); len(req.Acks) != 1 || len(req.Nacks) != 0 {
		t.Errorf("second request: acks %v nacks %v, want the message acked", req.Acks, req.Nacks)
	}
	cancel()
	if err := <-ended; err != nil {
		t.Errorf("Subscribe returned %v when its context ended, want nil", err)
	}
	if n := f.streamCount(); n != 1 {
		t.Errorf("%d streams opened, want 1: a handler's error must not reopen the stream", n)
	}
}
