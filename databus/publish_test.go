package databus_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestPublisherRecoversWhenTheTopicAppears: a publisher opened before its
// topic exists (an app started before the topic was created) gets
// NotFound for each publish, at once, and publishes once the topic is
// there. It used to stop for good after the first NotFound: every later
// publish waited out its deadline.
func TestPublisherRecoversWhenTheTopicAppears(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		w := startGateway(t, gateway.Config{Brokers: k.Brokers})
		topic := depstest.Name(t)
		ctx := context.Background()
		pub, err := dial(t, w.addr).NewPublisher(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		publish := func(from, n int) error {
			// A generous deadline: reaching it means the publish was never
			// answered, which is the bug.
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			err := pub.Publish(pctx, msgs(from, n)...)
			if isCtxErr(err) {
				t.Fatalf("publish of %d..%d was never answered: %v", from, from+n-1, err)
			}
			return err
		}
		for i := range 3 {
			if err := publish(i, 1); status.Code(err) != codes.NotFound || databus.Retryable(err) {
				t.Fatalf("publish %d to a missing topic: %v, want NotFound (not retryable)", i, err)
			}
		}

		if err := k.CreateTopics(ctx, 2, topic); err != nil {
			t.Fatal(err)
		}
		answered := map[string]bool{}
		// A real broker shows a new topic in its metadata a moment after
		// creating it: until then the gateway still answers NotFound.
		testkit.EventuallyNil(t, 30*time.Second, "a publish succeeds once the topic exists", func() error {
			err := publish(100, 1)
			if err == nil {
				answered["100"] = true
			}
			return err
		})
		for i := range 20 {
			if err := publish(1000+i*5, 5); err != nil {
				t.Fatalf("batch %d after the topic appeared: %v", i, err)
			}
			for j := range 5 {
				answered[strconv.Itoa(1000+i*5+j)] = true
			}
		}
		storedKeys(t, k, topic, answered)
	})
}

// TestFinalErrorFailsOnlyItsBatch: a batch the gateway refuses (more
// messages than it accepts) fails with InvalidArgument; the batches
// pipelined behind it on the same stream are published, and so are later
// ones. It used to fail every batch in flight with that error and then
// answer nothing more.
func TestFinalErrorFailsOnlyItsBatch(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := depstest.Topic(t, k, 1)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, MaxBatchMessages: 5})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		pub, err := dial(t, w.addr).NewPublisher(ctx, topic, databus.MaxInflight(8))
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		// A warm-up batch, so the ones below are not slowed by the
		// producer's first metadata request.
		if err := pub.Publish(ctx, msgs(0, 1)...); err != nil {
			t.Fatal(err)
		}
		batches := []struct{ from, n int }{{10, 3}, {100, 6}, {200, 3}, {300, 3}, {400, 1}}
		errs := make([]chan error, len(batches))
		for i, b := range batches {
			errs[i] = make(chan error, 1)
			if err := pub.PublishAsync(ctx, msgs(b.from, b.n), func(err error) { errs[i] <- err }); err != nil {
				t.Fatal(err)
			}
		}
		answered := map[string]bool{"0": true}
		for i, b := range batches {
			var err error
			select {
			case err = <-errs[i]:
			case <-ctx.Done():
				t.Fatalf("batch %d..%d never answered", b.from, b.from+b.n-1)
			}
			switch {
			case b.n > 5 && status.Code(err) != codes.InvalidArgument:
				t.Fatalf("batch of %d messages: %v, want InvalidArgument", b.n, err)
			case b.n <= 5 && err != nil:
				t.Fatalf("batch %d..%d, pipelined beside a refused one: %v", b.from, b.from+b.n-1, err)
			case err == nil:
				for j := range b.n {
					answered[strconv.Itoa(b.from+j)] = true
				}
			}
		}
		if err := pub.Publish(ctx, msgs(500, 2)...); err != nil {
			t.Fatalf("publish after the refused batch: %v", err)
		}
		answered["500"], answered["501"] = true, true
		stored := storedKeys(t, k, topic, answered)
		for j := range 6 {
			if key := strconv.Itoa(100 + j); stored[key] > 0 {
				t.Fatalf("message %s of the refused batch was stored", key)
			}
		}
		if len(stored) != len(answered) {
			t.Fatalf("%d messages stored, %d answered: %v", len(stored), len(answered), fmt.Sprint(stored))
		}
	})
}

// TestOversizedBatchFailsForGood: a 17 MiB batch, over what the gateway
// takes, between two 1-message batches: all three return within seconds,
// the big one with a final ResourceExhausted (Retryable false), the
// others stored. Over --max-stream-bytes the gateway reads the batch and refuses
// it; over gRPC's receive limit gRPC refuses it unread. The client used to
// take either end as worth retrying and resend the batch first on every
// new stream, so both batches hung until their contexts ended.
func TestOversizedBatchFailsForGood(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		for _, tc := range []struct {
			name string
			so   gateway.ServerOptions
		}{
			{"over max-stream-bytes", gateway.ServerOptions{}},                            // 16 MiB; gRPC's limit is 18 MiB
			{"over the gRPC receive limit", gateway.ServerOptions{MaxRecvBytes: 8 << 20}}, // below the stream's 16 MiB
		} {
			t.Run(tc.name, func(t *testing.T) {
				topic := depstest.Topic(t, k, 1)
				w := startGatewayWith(t, gateway.Config{Brokers: k.Brokers}, tc.so)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				pub := publisher(ctx, t, w.addr, topic)
				big := make([]databus.Message, 17*64) // 17 MiB of 16 KiB values
				for i := range big {
					big[i] = databus.Message{Key: []byte("big-" + strconv.Itoa(i)), Value: make([]byte, 16<<10)}
				}
				start := time.Now()
				beforeErr, bigErr, smallErr := make(chan error, 1), make(chan error, 1), make(chan error, 1)
				// A batch pipelined before the big one: the error is not
				// its, though its answer may not come before the stream ends.
				if err := pub.PublishAsync(ctx, msgs(0, 1), func(err error) { beforeErr <- err }); err != nil {
					t.Fatal(err)
				}
				if err := pub.PublishAsync(ctx, big, func(err error) { bigErr <- err }); err != nil {
					t.Fatal(err)
				}
				if err := pub.PublishAsync(ctx, msgs(1, 1), func(err error) { smallErr <- err }); err != nil {
					t.Fatal(err)
				}
				wait := func(what string, ch chan error) error {
					select {
					case err := <-ch:
						t.Logf("%s answered after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
						return err
					case <-time.After(10 * time.Second):
						t.Fatalf("%s not answered within 10s: the publisher is wedged", what)
						return nil
					}
				}
				if err := wait("the 1-message batch before it", beforeErr); err != nil {
					t.Fatalf("the 1-message batch before the big one: %v, want it stored", err)
				}
				err := wait("the 17 MiB batch", bigErr)
				if status.Code(err) != codes.ResourceExhausted || databus.Retryable(err) {
					t.Fatalf("the 17 MiB batch: %v (retryable %v), want a final ResourceExhausted", err, databus.Retryable(err))
				}
				if err := wait("the 1-message batch behind it", smallErr); err != nil {
					t.Fatalf("the 1-message batch: %v, want it stored", err)
				}
				if err := pub.Publish(ctx, msgs(2, 1)...); err != nil {
					t.Fatalf("a publish after the refused batch: %v", err)
				}
				stored := storedKeys(t, k, topic, map[string]bool{"0": true, "1": true, "2": true})
				if stored["big-0"] > 0 {
					t.Fatal("a message of the refused batch was stored")
				}
			})
		}
	})
}
