package databus_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lb"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestStreamsSpreadAfterAnAgeCycle: a consumer group's subscribers and a
// publisher reach gateways through the built-in connection balancer (a
// Kubernetes Service). While only gateway A is up every stream is on A;
// then B starts, as a pod the autoscaler adds, and takes nothing until
// the connections reach their maximum age: the gateways end their
// streams in good order, the clients reconnect through the balancer, and
// the group ends up on both gateways. Throughout, every message answered
// as published is stored exactly once (a moved publisher resends only
// what the gateway never read) and consumed at least once; the
// duplicates consumers see are redeliveries.
func TestStreamsSpreadAfterAnAgeCycle(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		const members, partitions = 4, 8
		topic := depstest.Topic(t, k, partitions)
		group := depstest.Name(t)
		so := gateway.ServerOptions{MaxConnectionAge: 3 * time.Second, MaxConnectionAgeGrace: 20 * time.Second}
		regs := map[string]*prometheus.Registry{"A": prometheus.NewRegistry(), "B": prometheus.NewRegistry()}
		cfg := func(name string) gateway.Config {
			return gateway.Config{Brokers: k.Brokers, Registry: regs[name], CommitInterval: 100 * time.Millisecond}
		}
		a := startGatewayWith(t, cfg("A"), so)
		bAddr := testkit.FreeAddr(t) // refuses until B starts there
		names := map[string]string{a.addr: "A", bAddr: "B"}

		bal, err := lb.NewTCP(lb.Config{Upstreams: []string{a.addr, bAddr}, FailTimeout: 200 * time.Millisecond}, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		ln := testkit.Listen(t)
		go bal.Serve(ln)
		t.Cleanup(func() { ln.Close(); bal.Close() })

		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var mu sync.Mutex
		consumed := map[string]int{}
		subCtx, stopSubs := context.WithCancel(ctx)
		var subs sync.WaitGroup
		for range members {
			c := dial(t, ln.Addr().String())
			subs.Add(1)
			go func() {
				defer subs.Done()
				err := c.Subscribe(subCtx, topic, group, func(_ context.Context, ds []databus.Delivery) error {
					mu.Lock()
					for _, d := range ds {
						consumed[string(d.Key)]++
					}
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Errorf("Subscribe: %v", err)
				}
			}()
		}
		defer func() { stopSubs(); subs.Wait() }()

		placement := func() string {
			s := ""
			for _, name := range []string{"A", "B"} {
				reg := regs[name]
				s += fmt.Sprintf("gateway %s: %v subscribe streams, %v publish streams, %v group members in Kafka, %v messages delivered; ",
					name,
					testkit.MetricSum(t, reg, "databus_streams", map[string]string{"kind": "subscribe"}),
					testkit.MetricSum(t, reg, "databus_streams", map[string]string{"kind": "publish"}),
					testkit.MetricSum(t, reg, "databus_kafka_clients", map[string]string{"kind": "member"}),
					testkit.MetricSum(t, reg, "databus_messages_out_total", nil))
			}
			conns := map[string]int{}
			for addr, n := range bal.Placement() {
				conns[names[addr]] = n
			}
			return s + fmt.Sprintf("balancer connections %v", conns)
		}
		subscribeStreams := func(name string) float64 {
			return testkit.MetricSum(t, regs[name], "databus_streams", map[string]string{"kind": "subscribe"})
		}
		testkit.Eventually(t, 30*time.Second, "every subscriber on gateway A", func() bool { return subscribeStreams("A") == members })

		// A publisher through the balancer too, publishing throughout.
		pub, err := dial(t, ln.Addr().String()).NewPublisher(ctx, topic, databus.MaxInflight(4))
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		answered := map[string]bool{}
		stopPub := make(chan struct{})
		pubDone := make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stopPub:
					pubDone <- nil
					return
				default:
				}
				ms := msgs(i*10, 10)
				if err := pub.Publish(ctx, ms...); err != nil {
					pubDone <- fmt.Errorf("batch %d: %w", i, err)
					return
				}
				mu.Lock()
				for _, m := range ms {
					answered[string(m.Key)] = true
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
		testkit.Eventually(t, 30*time.Second, "messages consumed through gateway A", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(consumed) > 0
		})
		before := placement()
		t.Logf("before gateway B starts: %s", before)

		bln, err := net.Listen("tcp", bAddr)
		if err != nil {
			t.Fatalf("gateway B cannot listen on %s, free a moment ago: %v", bAddr, err)
		}
		serveGateway(t, bln, cfg("B"), so)
		testkit.Eventually(t, 45*time.Second, "the group's subscribers on both gateways after an age cycle", func() bool {
			return subscribeStreams("A") >= 1 && subscribeStreams("B") >= 1 &&
				testkit.MetricSum(t, regs["B"], "databus_messages_out_total", nil) > 0
		})
		t.Logf("after an age cycle: %s", placement())

		close(stopPub)
		if err := <-pubDone; err != nil {
			t.Fatalf("a publish failed while streams moved: %v", err)
		}
		mu.Lock()
		want := make(map[string]bool, len(answered))
		for key := range answered {
			want[key] = true
		}
		mu.Unlock()
		testkit.EventuallyNil(t, 45*time.Second, "every message answered as published consumed", func() error {
			mu.Lock()
			defer mu.Unlock()
			for key := range want {
				if consumed[key] == 0 {
					return fmt.Errorf("message %s not consumed yet (%d of %d)", key, len(consumed), len(want))
				}
			}
			return nil
		})
		stored := storedKeys(t, k, topic, want)
		mu.Lock()
		defer mu.Unlock()
		lost, storedTwice, redelivered := 0, 0, 0
		for key := range want {
			if consumed[key] == 0 {
				lost++
			}
		}
		for key, n := range stored {
			storedTwice += n - 1
			if !want[key] {
				t.Errorf("message %s stored but never answered as published", key)
			}
		}
		for key, n := range consumed {
			redelivered += max(n-stored[key], 0) // beyond the copies Kafka has
		}
		moved := 0.0
		for _, reg := range regs {
			moved += testkit.MetricSum(t, reg, "databus_stream_errors_total", map[string]string{"code": "Unavailable"})
		}
		t.Logf("%d messages answered as published: %d lost, %d stored twice, %d delivered again (redeliveries); %v streams moved", len(want), lost, storedTwice, redelivered, moved)
		if lost != 0 || storedTwice != 0 {
			t.Fatalf("%d lost, %d stored twice: want 0 and 0", lost, storedTwice)
		}
	})
}
