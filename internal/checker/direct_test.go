package checker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

func TestDirectConfigErrors(t *testing.T) {
	brokers := []string{"127.0.0.1:1"}
	for _, tt := range []struct {
		name string
		cfg  checker.Config
		want string // "" = valid: the run must get past validation
	}{
		{"no brokers", checker.Config{Direct: true, Target: "127.0.0.1:1"}, "give --brokers"},
		{"echo", checker.Config{Direct: true, Brokers: brokers, Scenario: checker.Echo}, "--scenario throughput or latency"},
		{"ticker", checker.Config{Direct: true, Brokers: brokers, Scenario: checker.Ticker}, "--scenario throughput or latency"},
		{"aggregation", checker.Config{Direct: true, Brokers: brokers, Aggregation: true}, "drop --aggregation"},
		{"connections", checker.Config{Direct: true, Brokers: brokers, Connections: 1}, "drop --connections"},
		{"faults", checker.Config{Direct: true, Brokers: brokers, KillEvery: time.Second, GatewayCmd: "x"}, "drop --kill-every"},
		{"gateway metrics", checker.Config{Direct: true, Brokers: brokers, GatewayMetrics: "http://x/metrics"}, "drop --gateway-metrics"},
		{"groups without a gateway", checker.Config{Direct: true, Brokers: brokers, Groups: 1}, "give --target"},
		{"no gateway needed", checker.Config{Direct: true, Brokers: brokers}, ""},
		{"latency", checker.Config{Direct: true, Brokers: brokers, Scenario: checker.Latency}, ""},
		{"gateway mode still needs a target", checker.Config{Brokers: brokers}, "give --target"},
		{"direct consumers need no gateway", checker.Config{Direct: true, Brokers: brokers, Consume: checker.Only, Groups: 1}, ""},
		{"direct consumers drop no member", checker.Config{Direct: true, Brokers: brokers, Consume: checker.Only, Groups: 1, DropMember: true, KillEvery: time.Second, FaultPhase: checker.ConsumePhase}, "drop --kill-every"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Nothing listens on port 1: a valid config fails at Kafka, soon.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := checker.Run(ctx, tt.cfg, nil)
			if tt.want == "" {
				if err == nil || errors.Is(err, checker.ErrConfig) {
					t.Fatalf("%v, want a valid config failing to reach Kafka", err)
				}
				return
			}
			if !errors.Is(err, checker.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want an ErrConfig saying %q", err, tt.want)
			}
		})
	}
}

// TestDirectDelivers produces straight to kfake and verifies through a
// gateway: the direct producer's records carry the headers the
// consumers check, and every acked one arrives, through the gateway
// (only --consume only makes --direct the consumers').
func TestDirectDelivers(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	topic := newTopic(t, k)
	reg := prometheus.NewRegistry()
	target := startGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg})
	res, err := checker.Run(context.Background(), checker.Config{
		Direct: true, Target: target, Brokers: k.Brokers, Topic: topic,
		Streams: 2, Inflight: 4, Warmup: -1, Duration: 500 * time.Millisecond,
		Groups: 1, Members: 1, Consume: checker.After, DrainTimeout: 20 * time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := summary(t, res)
	if !res.Direct || res.Target != strings.Join(k.Brokers, ",") || !strings.Contains(out, "straight to Kafka") {
		t.Errorf("direct %v, target %q: the result must say it went straight to %v", res.Direct, res.Target, k.Brokers)
	}
	if res.PublishCPUS <= 0 || !strings.Contains(out, "µs per acked message") {
		t.Errorf("producers' CPU %.3f s: want it measured and said", res.PublishCPUS)
	}
	if res.Acked < 100 || res.MsgsPerSec <= 0 || res.PublishLatency.Count == 0 {
		t.Errorf("%d acked, %.0f msgs/s, %d batches timed: want batches of 100 acked in the window", res.Acked, res.MsgsPerSec, res.PublishLatency.Count)
	}
	if !res.OK() || res.Delivery.Acked != res.Acked || res.Delivery.Lost != 0 {
		t.Errorf("delivery %+v of %d acked: want every acked message received", res.Delivery, res.Acked)
	}
	if out := testkit.MetricSum(t, reg, "databus_messages_out_total", nil); out < float64(res.Acked) {
		t.Errorf("the gateway delivered %.0f messages of %d acked: the consumers must read through it", out, res.Acked)
	}
}

// TestRateIsPaced runs the direct producer at an offered rate: it may
// send fewer messages than the rate allows (a slow machine) but never
// more, where without --rate it sends as fast as its in-flight limit
// allows; and it counts the Produce requests it wrote in the window.
func TestRateIsPaced(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	const (
		streams, batch = 2, 10
		rate           = 400.0 // a batch every 50 ms per stream
	)
	warmup, window := 200*time.Millisecond, time.Second
	res, err := checker.Run(context.Background(), checker.Config{
		Direct: true, Brokers: k.Brokers, Topic: newTopic(t, k),
		Streams: streams, Batch: batch, Inflight: 16, Rate: rate, Warmup: warmup, Duration: window,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Each stream's first batch falls in its first period, then one per
	// period until the window ends; one more per stream is the message
	// each stream's opening sends.
	period := time.Duration(float64(streams*batch) / rate * float64(time.Second))
	most := int64(streams * (batch*(int((warmup+window)/period)+1) + 1))
	if res.Acked == 0 || res.Acked > most {
		t.Errorf("%d messages acked at --rate %g over %v: want some, and at most %d", res.Acked, rate, warmup+window, most)
	}
	if res.Rate != rate || !strings.Contains(summary(t, res), "offered: 400 msgs/s") {
		t.Errorf("result's rate %g: want %g, said", res.Rate, rate)
	}
	if res.ProduceRequests <= 0 {
		t.Errorf("%d Produce requests counted in the window: want the producers' own", res.ProduceRequests)
	}
}

func TestRateConfigErrors(t *testing.T) {
	brokers := []string{"127.0.0.1:1"}
	for _, tt := range []struct {
		name string
		cfg  checker.Config
		want string
	}{
		{"negative", checker.Config{Direct: true, Brokers: brokers, Rate: -1}, "give messages per second"},
		{"too high", checker.Config{Direct: true, Brokers: brokers, Rate: 2 * checker.MaxRate}, "give messages per second"},
		{"ticker", checker.Config{Target: "127.0.0.1:1", Scenario: checker.Ticker, Rate: 10}, "drop --rate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checker.Run(context.Background(), tt.cfg, nil)
			if !errors.Is(err, checker.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want an ErrConfig saying %q", err, tt.want)
			}
		})
	}
}
