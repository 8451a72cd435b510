package databus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// heldSubscriber runs Subscribe through a proxy whose first batch the
// handler holds until release is closed; every later batch is recorded.
type heldSubscriber struct {
	mu      sync.Mutex
	held    []string        // keys of the first batch
	got     map[string]bool // keys of every later batch
	holding chan struct{}   // closed once the first batch is held
	release chan struct{}
	ended   chan error // Subscribe's return
}

func subscribeHolding(ctx context.Context, t *testing.T, addr, topic, group string, opts ...databus.SubscribeOption) *heldSubscriber {
	t.Helper()
	s := &heldSubscriber{got: map[string]bool{}, holding: make(chan struct{}), release: make(chan struct{}), ended: make(chan error, 1)}
	c := dial(t, addr)
	first := true
	go func() {
		s.ended <- c.Subscribe(ctx, topic, group, func(_ context.Context, ds []databus.Delivery) error {
			s.mu.Lock()
			if first {
				first = false
				for _, d := range ds {
					s.held = append(s.held, string(d.Key))
				}
				s.mu.Unlock()
				close(s.holding)
				<-s.release
				return nil // acked: too late, the stream is gone
			}
			for _, d := range ds {
				s.got[string(d.Key)] = true
			}
			s.mu.Unlock()
			return nil
		}, append([]databus.SubscribeOption{databus.BatchSize(10)}, opts...)...)
	}()
	return s
}

func (s *heldSubscriber) missing(keys ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	first := ""
	for _, k := range keys {
		if !s.got[k] {
			if n == 0 {
				first = k
			}
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("%d of %d messages not received after the restart, first %s", n, len(keys), first)
	}
	return nil
}

func keys(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(from + i)
	}
	return out
}

// TestSubscribeSurvivesAGatewayRestart: the gateway dies (its connection
// reset, the process gone) while the handler holds a batch; the handler's
// ack fails, Subscribe reconnects to the restarted gateway as a new group
// member, the held batch is delivered again (it was never acked) and the
// subscription goes on. Subscribe used to return the failed ack's io.EOF:
// a rolling deploy of the gateway ended every consumer.
func TestSubscribeSurvivesAGatewayRestart(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := depstest.Topic(t, k, 2)
		cfg := gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond}
		old := startGateway(t, cfg)
		px := testkit.NewProxy(t, old.addr)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		pub, err := dial(t, px.Addr()).NewPublisher(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		if err := pub.Publish(ctx, msgs(0, 100)...); err != nil {
			t.Fatal(err)
		}

		sctx, stop := context.WithCancel(ctx)
		defer stop()
		s := subscribeHolding(sctx, t, px.Addr(), topic, depstest.Group(t))
		select {
		case <-s.holding:
		case err := <-s.ended:
			t.Fatalf("Subscribe returned before a batch: %v", err)
		case <-ctx.Done():
			t.Fatal("no batch delivered")
		}

		// The restart: connections reset, the old gateway gone, a new
		// one behind the same address.
		restarted := startGateway(t, cfg)
		px.SetUpstream(restarted.addr)
		px.Cut()
		old.kill()
		close(s.release)

		testkit.EventuallyNil(t, 60*time.Second, "every message, the held batch again among them, received after the restart", func() error {
			select {
			case err := <-s.ended:
				t.Fatalf("Subscribe returned: %v", err)
			default:
			}
			return s.missing(s.held...)
		})
		if err := pub.Publish(ctx, msgs(100, 50)...); err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyNil(t, 60*time.Second, "every message received", func() error {
			return s.missing(append(keys(0, 100), keys(100, 50)...)...)
		})
		stop()
		select {
		case err := <-s.ended:
			if err != nil {
				t.Fatalf("Subscribe returned %v when its context ended, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Subscribe did not return after its context ended")
		}
	})
}

// TestSubscribeWithoutReconnect: Reconnect(false) ends Subscribe with the
// error that broke its stream.
func TestSubscribeWithoutReconnect(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := depstest.Topic(t, k, 1)
	w := startGateway(t, gateway.Config{Brokers: k.Brokers})
	px := testkit.NewProxy(t, w.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pub, err := dial(t, w.addr).NewPublisher(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(ctx, msgs(0, 10)...); err != nil {
		t.Fatal(err)
	}
	s := subscribeHolding(ctx, t, px.Addr(), topic, depstest.Group(t), databus.Reconnect(false))
	<-s.holding
	px.Cut()
	close(s.release)
	select {
	case err := <-s.ended:
		if err == nil {
			t.Fatal("Subscribe returned nil after its stream broke, want the error")
		}
		t.Logf("Subscribe returned %v", err)
	case <-ctx.Done():
		t.Fatal("Subscribe with Reconnect(false) did not return after its stream broke")
	}
}
