package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestOneUnackedMessageStopsDelivery: a subscriber that never acks one
// message and acks every other one gets at most its cap of messages from
// the unacked one onwards, then nothing until it acks it: the gateway must
// not keep polling (and tracking offsets) past a gap it can never commit.
func TestOneUnackedMessageStopsDelivery(t *testing.T) {
	const (
		total = 600
		limit = 100
	)
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprintf("partitions=%d", partitions), func(t *testing.T) {
			var (
				hookMu     sync.Mutex
				maxHeld    int
				violations []string
			)
			gateway.SetDeliveredHook(t, func(held, trackerHeld, cap int) {
				hookMu.Lock()
				defer hookMu.Unlock()
				maxHeld = max(maxHeld, held)
				if (held > cap || trackerHeld > cap) && len(violations) < 5 {
					violations = append(violations, fmt.Sprintf("stream holds %d offsets, a tracker %d, over the cap %d", held, trackerHeld, cap))
				}
			})
			k := kafkaFor(t, deps.KafkaFake)
			topic := newTopic(t, k, partitions)
			w := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 50 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			w.publishAll(t, ctx, topic, total)

			sub, err := w.client(t).OpenSubscription(ctx, topic, "g", databus.MaxUnacked(limit), databus.BatchSize(10))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			var (
				mu       sync.Mutex
				received keys
				stuck    *databus.Delivery // never acked (until the end of the test)
				count    int
			)
			recvErr := ackAllButOne(sub, 0, func(batch []databus.Delivery, unacked *databus.Delivery) {
				received.add(batch...)
				mu.Lock()
				defer mu.Unlock()
				count += len(batch)
				if unacked != nil {
					stuck = unacked
				}
			})
			read := func() int {
				mu.Lock()
				defer mu.Unlock()
				return count
			}
			// Wait until delivery stops: no message for half a second.
			last, since := -1, time.Now()
			testkit.EventuallyNil(t, 30*time.Second, "delivery to settle", func() error {
				select {
				case err := <-recvErr:
					t.Fatalf("subscription ended: %v", err)
				default:
				}
				if n := read(); n != last {
					last, since = n, time.Now()
					return fmt.Errorf("%d delivered so far", n)
				}
				if time.Since(since) < 500*time.Millisecond {
					return fmt.Errorf("%d delivered, waiting for more", last)
				}
				return nil
			})
			n := read()
			hookMu.Lock()
			if len(violations) > 0 {
				t.Errorf("the bound broke: %v", violations)
			}
			if maxHeld != limit {
				t.Errorf("the stream held at most %d offsets, want the cap %d reached", maxHeld, limit)
			}
			hookMu.Unlock()
			if n >= total {
				t.Fatalf("all %d messages delivered while one stayed unacked: the cap of %d does not bound what the stream holds", n, limit)
			}
			if partitions == 1 && n != limit {
				t.Fatalf("%d messages delivered from the unacked one on, want exactly the cap %d", n, limit)
			}
			// Acking the stuck message lets the rest through.
			mu.Lock()
			d := *stuck
			mu.Unlock()
			if err := sub.Ack(d); err != nil {
				t.Fatal(err)
			}
			received.await(t, 30*time.Second, "the rest delivered once the gap is acked", total, nil)
		})
	}
}
