package databus_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
)

// TestCloseCommitsTheLastAcks: a member acks a batch and closes its
// subscription at once, round after round, each round a new subscription
// of the same group; no message acked in a round comes again in a later
// one, nor to a fresh member at the end. Close used to cancel the stream
// right after CloseSend, so the gateway could end it before it read the
// acks already sent, and their messages came again.
func TestCloseCommitsTheLastAcks(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const rounds, perRound = 20, 50
		topic := depstest.Topic(t, k, 1)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers})
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		if err := publisher(ctx, t, w.addr, topic).Publish(ctx, msgs(0, rounds*perRound)...); err != nil {
			t.Fatal(err)
		}
		group := depstest.Group(t)
		c := dial(t, w.addr)
		// One batch of a new subscription: perRound messages at most, as
		// it holds no more unacked.
		firstBatch := func() (*databus.Subscription, []databus.Delivery) {
			t.Helper()
			sub, err := c.OpenSubscription(ctx, topic, group, databus.BatchSize(perRound), databus.MaxUnacked(perRound))
			if err != nil {
				t.Fatal(err)
			}
			for {
				b, err := sub.Recv()
				if err != nil {
					t.Fatalf("Recv: %v", err)
				}
				if len(b.Messages) > 0 {
					return sub, b.Messages
				}
			}
		}
		acked := map[string]bool{}
		redelivered, closeErrs := 0, 0
		for range rounds {
			sub, ds := firstBatch()
			for _, d := range ds {
				if acked[string(d.Key)] {
					redelivered++
				}
				acked[string(d.Key)] = true
			}
			if err := sub.Ack(ds...); err != nil {
				t.Fatal(err)
			}
			if err := sub.Close(); err != nil {
				closeErrs++
				t.Logf("Close: %v", err)
			}
		}
		lost := rounds*perRound - len(acked)
		t.Logf("%d rounds of %d messages: %d acked, %d acked and delivered again, %d never delivered, %d Close errors", rounds, perRound, len(acked), redelivered, lost, closeErrs)
		if redelivered > 0 || lost > 0 || closeErrs > 0 {
			t.Fatalf("%d acked messages delivered again, %d never delivered, %d Close errors: want 0", redelivered, lost, closeErrs)
		}
		// A fresh member of the group starts after the last ack: the
		// first message it gets is one published after every round.
		firstAfter(ctx, t, w.addr, topic, group)
	})
}

// TestCloseWaitsForTheGateway: Close returns nil once the gateway ended
// the stream, also while another goroutine waits in Recv (which then
// returns io.EOF); against a gateway that never ends it, Close gives up
// after CloseTimeout and says so.
func TestCloseWaitsForTheGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Run("ended", func(t *testing.T) {
		f := startFakeGateway(t)
		sub, err := dial(t, f.addr).OpenSubscription(ctx, "orders", "billing")
		if err != nil {
			t.Fatal(err)
		}
		f.deliver(consumed(0, 0, 1))
		if _, err := sub.Recv(); err != nil {
			t.Fatal(err)
		}
		recvErr := make(chan error, 1)
		go func() {
			_, err := sub.Recv()
			recvErr <- err
		}()
		if err := sub.Close(); err != nil {
			t.Errorf("Close: %v, want nil", err)
		}
		if err := <-recvErr; !errors.Is(err, io.EOF) {
			t.Errorf("Recv during Close: %v, want io.EOF", err)
		}
		if err := sub.Close(); err != nil {
			t.Errorf("Close again: %v, want nil", err)
		}
	})
	t.Run("hangs", func(t *testing.T) {
		f := startFakeGateway(t)
		f.hang.Store(true)
		sub, err := dial(t, f.addr).OpenSubscription(ctx, "orders", "billing", databus.CloseTimeout(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.Close(); err == nil || !strings.Contains(err.Error(), "CloseTimeout") {
			t.Errorf("Close: %v, want an error naming CloseTimeout", err)
		}
	})
}
