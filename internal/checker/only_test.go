package checker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
)

// TestConsumeOnly fills a topic, then drains it twice with --consume
// only: each drain must get every record (fresh groups, or the second
// would resume after the first's commits and get nothing), and its
// window must bracket the draining alone.
func TestConsumeOnly(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	addr := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
	topic := newTopic(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	if _, err := checker.Run(ctx, checker.Config{Target: addr, Topic: topic, Brokers: k.Brokers, Consume: checker.Only, Groups: 1}, nil); err == nil || !strings.Contains(err.Error(), "fill it first") {
		t.Fatalf("draining an empty topic: %v, want an error saying to fill it first", err)
	}
	fill, err := checker.Run(ctx, checker.Config{
		Target: addr, Topic: topic, Scenario: checker.Throughput, Streams: 2, Batch: 50, Inflight: 4,
		Warmup: -1, Duration: 500 * time.Millisecond,
	}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if fill.Acked == 0 || fill.Failed != 0 {
		t.Fatalf("filling the topic: %d acked, %d failed", fill.Acked, fill.Failed)
	}
	for i := range 2 {
		var opened, closed time.Time
		var calls int
		res, err := checker.Run(ctx, checker.Config{
			Target: addr, Topic: topic, Brokers: k.Brokers, Consume: checker.Only, Groups: 1, Members: 2,
			DrainTimeout: 30 * time.Second,
			OnWindow: func(open bool) {
				calls++
				if open {
					opened = time.Now()
				} else {
					closed = time.Now()
				}
			},
		}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		out := summary(t, res)
		d := res.Delivery
		switch {
		case d == nil:
			t.Fatalf("drain %d: no delivery verification", i+1)
		case d.Acked != fill.Acked:
			t.Fatalf("drain %d: expected %d records from the topic's offsets, the filling run acked %d", i+1, d.Acked, fill.Acked)
		case d.Lost != 0 || !res.OK():
			t.Fatalf("drain %d: %d of %d records lost (first: %v): a consume-only run's groups must each read the topic from its start", i+1, d.Lost, d.Acked, d.Sample)
		case d.Received < d.Acked || d.Cycles == 0 || d.CyclesPerSec <= 0 || d.ReceivedPerSec <= 0:
			t.Fatalf("drain %d: %d received in %d cycles (%.0f/s, %.0f msgs/s)", i+1, d.Received, d.Cycles, d.CyclesPerSec, d.ReceivedPerSec)
		case res.Acked != 0 || res.MsgsPerSec != 0:
			t.Fatalf("drain %d published: %d acked", i+1, res.Acked)
		case !strings.Contains(out, "consume only") || !strings.Contains(out, "every record the topic held"):
			t.Fatalf("drain %d: the summary does not say it drained only:\n%s", i+1, out)
		}
		window := closed.Sub(opened)
		if calls != 2 || window <= 0 {
			t.Fatalf("drain %d: OnWindow called %d times, window %v: want open then close", i+1, calls, window)
		}
		if drain := time.Duration(d.DrainS * float64(time.Second)); drain > window || window-drain > 100*time.Millisecond {
			t.Fatalf("drain %d: the window (%v) does not bracket the drain (%v) alone", i+1, window, drain)
		}
	}
}

func TestConsumeOnlyConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  checker.Config
		want string
	}{
		{checker.Config{Consume: checker.Only, Groups: 1}, "give --groups, and --brokers"},
		{checker.Config{Consume: checker.Only, Brokers: []string{"127.0.0.1:1"}}, "give --groups, and --brokers"},
		{checker.Config{Consume: checker.Only, Groups: 1, Brokers: []string{"127.0.0.1:1"}, KillEvery: time.Second, DropMember: true}, "--fault-phase consume"},
	} {
		tt.cfg.Target = "127.0.0.1:1"
		_, err := checker.Run(context.Background(), tt.cfg, nil)
		if !errors.Is(err, checker.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an ErrConfig saying %q", tt.cfg, err, tt.want)
		}
	}
}
