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
		f := newFleet(t, k, gateway.ServerOptions{MaxConnectionAge: 3 * time.Second, MaxConnectionAgeGrace: 20 * time.Second})
		t.Logf("before gateway B starts: %s", f.placement())
		f.startB()
		testkit.Eventually(t, 45*time.Second, "the group's subscribers on both gateways after an age cycle", func() bool {
			return f.streams("A", "subscribe") >= 1 && f.streams("B", "subscribe") >= 1 &&
				testkit.MetricSum(t, f.regs["B"], "databus_messages_out_total", nil) > 0
		})
		t.Logf("after an age cycle: %s", f.placement())
		f.publishMore(200)
		f.check()
	})
}

// TestStoppedGatewaySendsStreamsElsewhere: a gateway that stops (a pod
// drained for a rolling deploy) first tells its clients to go away, then
// ends their streams in good order: they reopen them at once on the
// other gateway behind the balancer, not on the stopping one, and
// nothing is lost or stored twice.
func TestStoppedGatewaySendsStreamsElsewhere(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		f := newFleet(t, k, gateway.ServerOptions{}) // connections never age in this test
		f.startB()
		t.Logf("before gateway A stops: %s", f.placement())
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		if err := gateway.Stop(ctx, f.gws["A"].srv, f.gws["A"].g); err != nil {
			t.Fatalf("gateway A did not stop in good order: %v", err)
		}
		t.Logf("gateway A stopped in %v", time.Since(start).Round(time.Millisecond))
		testkit.Eventually(t, 10*time.Second, "every stream on gateway B", func() bool {
			return f.streams("B", "subscribe") == fleetMembers && f.streams("B", "publish") == 1
		})
		t.Logf("%v after gateway A began to stop: %s", time.Since(start).Round(time.Millisecond), f.placement())
		f.publishMore(100)
		f.check()
		// Each stream ended once on A: none was reopened on the stopping
		// gateway (drained before being told to go away, clients came
		// back to it over their old connections until it closed them).
		ended := testkit.MetricSum(t, f.regs["A"], "databus_stream_errors_total", map[string]string{"code": "Unavailable"})
		if ended != fleetMembers+1 {
			t.Fatalf("%v streams ended on the stopping gateway, want %d: clients came back to it", ended, fleetMembers+1)
		}
	})
}

const fleetMembers, fleetPartitions = 4, 8

// fleet is gateway A, and B to come at an address that refuses until
// then, behind the connection balancer; fleetMembers subscribers of one
// group and a publisher, all through the balancer; and what they
// published and consumed.
type fleet struct {
	t     *testing.T
	k     *deps.Kafka
	topic string
	so    gateway.ServerOptions
	regs  map[string]*prometheus.Registry
	gws   map[string]*gw
	bAddr string
	names map[string]string // address -> gateway
	bal   *lb.TCP

	mu       sync.Mutex
	consumed map[string]int
	answered map[string]bool

	stopPub chan struct{}
	pubDone chan error
}

// newFleet starts the fleet with gateway A only and returns once
// messages published through A are consumed through it.
func newFleet(t *testing.T, k *deps.Kafka, so gateway.ServerOptions) *fleet {
	f := &fleet{t: t, k: k, topic: depstest.Topic(t, k, fleetPartitions), so: so,
		regs:     map[string]*prometheus.Registry{"A": prometheus.NewRegistry(), "B": prometheus.NewRegistry()},
		gws:      map[string]*gw{},
		consumed: map[string]int{}, answered: map[string]bool{},
		stopPub: make(chan struct{}), pubDone: make(chan error, 1)}
	f.gws["A"] = startGatewayWith(t, f.cfg("A"), so)
	f.bAddr = testkit.FreeAddr(t) // refuses until B starts there
	f.names = map[string]string{f.gws["A"].addr: "A", f.bAddr: "B"}
	var err error
	f.bal, err = lb.NewTCP(lb.Config{Upstreams: []string{f.gws["A"].addr, f.bAddr}, FailTimeout: 200 * time.Millisecond}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ln := testkit.Listen(t)
	go f.bal.Serve(ln)
	t.Cleanup(func() { ln.Close(); f.bal.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	var subs sync.WaitGroup
	t.Cleanup(func() { cancel(); subs.Wait() })
	group := depstest.Name(t)
	for range fleetMembers {
		c := dial(t, ln.Addr().String())
		subs.Add(1)
		go func() {
			defer subs.Done()
			err := c.Subscribe(ctx, f.topic, group, func(_ context.Context, ds []databus.Delivery) error {
				f.mu.Lock()
				for _, d := range ds {
					f.consumed[string(d.Key)]++
				}
				f.mu.Unlock()
				return nil
			})
			if err != nil {
				t.Errorf("Subscribe: %v", err)
			}
		}()
	}
	testkit.Eventually(t, 30*time.Second, "every subscriber on gateway A", func() bool { return f.streams("A", "subscribe") == fleetMembers })

	pub := publisher(ctx, t, ln.Addr().String(), f.topic, databus.MaxInflight(4))
	go func() {
		for i := 0; ; i++ {
			select {
			case <-f.stopPub:
				f.pubDone <- nil
				return
			default:
			}
			ms := msgs(i*10, 10)
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := pub.Publish(pctx, ms...)
			cancel()
			if err != nil {
				f.pubDone <- fmt.Errorf("batch %d: %w", i, err)
				return
			}
			f.mu.Lock()
			for _, m := range ms {
				f.answered[string(m.Key)] = true
			}
			f.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	testkit.Eventually(t, 30*time.Second, "messages consumed through gateway A", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.consumed) > 0
	})
	return f
}

func (f *fleet) cfg(name string) gateway.Config {
	return gateway.Config{Brokers: f.k.Brokers, Registry: f.regs[name], CommitInterval: 100 * time.Millisecond}
}

// startB starts gateway B where the balancer sends every other new
// connection.
func (f *fleet) startB() {
	ln, err := net.Listen("tcp", f.bAddr)
	if err != nil {
		f.t.Fatalf("gateway B cannot listen on %s, free a moment ago: %v", f.bAddr, err)
	}
	f.gws["B"] = serveGateway(f.t, ln, f.cfg("B"), f.so)
}

func (f *fleet) streams(gateway, kind string) float64 {
	return testkit.MetricSum(f.t, f.regs[gateway], "databus_streams", map[string]string{"kind": kind})
}

// placement says where the streams, the group's Kafka members, the
// deliveries and the balancer's connections are.
func (f *fleet) placement() string {
	s := ""
	for _, name := range []string{"A", "B"} {
		s += fmt.Sprintf("gateway %s: %v subscribe streams, %v publish streams, %v group members in Kafka, %v messages delivered; ",
			name, f.streams(name, "subscribe"), f.streams(name, "publish"),
			testkit.MetricSum(f.t, f.regs[name], "databus_kafka_clients", map[string]string{"kind": "member"}),
			testkit.MetricSum(f.t, f.regs[name], "databus_messages_out_total", nil))
	}
	conns := map[string]int{}
	for addr, n := range f.bal.Placement() {
		conns[f.names[addr]] = n
	}
	return s + fmt.Sprintf("balancer connections %v", conns)
}

// publishMore waits until n more messages are answered as published.
func (f *fleet) publishMore(n int) {
	f.mu.Lock()
	want := len(f.answered) + n
	f.mu.Unlock()
	testkit.Eventually(f.t, 30*time.Second, fmt.Sprintf("%d more messages published", n), func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.answered) >= want
	})
}

// check stops publishing and fails the test unless every message
// answered as published is consumed and stored exactly once.
func (f *fleet) check() {
	t := f.t
	close(f.stopPub)
	if err := <-f.pubDone; err != nil {
		t.Fatalf("a publish failed while streams moved: %v", err)
	}
	f.mu.Lock()
	want := make(map[string]bool, len(f.answered))
	for key := range f.answered {
		want[key] = true
	}
	f.mu.Unlock()
	testkit.EventuallyNil(t, 45*time.Second, "every message answered as published consumed", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for key := range want {
			if f.consumed[key] == 0 {
				return fmt.Errorf("message %s not consumed yet (%d of %d)", key, len(f.consumed), len(want))
			}
		}
		return nil
	})
	stored := storedKeys(t, f.k, f.topic, want)
	f.mu.Lock()
	defer f.mu.Unlock()
	lost, storedTwice, redelivered := 0, 0, 0
	for key := range want {
		if f.consumed[key] == 0 {
			lost++
		}
	}
	for key, n := range stored {
		storedTwice += n - 1
		if !want[key] {
			t.Errorf("message %s stored but never answered as published", key)
		}
	}
	for key, n := range f.consumed {
		redelivered += max(n-stored[key], 0) // beyond the copies Kafka has
	}
	moved := 0.0
	for _, reg := range f.regs {
		moved += testkit.MetricSum(t, reg, "databus_stream_errors_total", map[string]string{"code": "Unavailable"})
	}
	t.Logf("%d messages answered as published: %d lost, %d stored twice, %d delivered again (redeliveries); %v streams moved", len(want), lost, storedTwice, redelivered, moved)
	if lost != 0 || storedTwice != 0 {
		t.Fatalf("%d lost, %d stored twice: want 0 and 0", lost, storedTwice)
	}
}
