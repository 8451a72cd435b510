package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/testkit"
)

// BenchmarkMemoryCost measures what the gateway's sizing counts
// (StreamCost, ProducerCost, BaseCost in sizing.go) on a gateway process
// of its own: its RSS with no stream, then with 1,000 publish streams
// sharing the aggregated producer (a connection each, the costlier shape),
// then with 200 more that each have their own producer. It reports them
// as KiB/stream, KiB/producer (on top of its stream) and MiB/base. RSS
// holds garbage not yet collected, so the figures move by some percent
// from run to run; the costs the sizing uses round them up.
//
//	go test -run '^$' -bench MemoryCost -benchtime 1x ./internal/gateway/
func BenchmarkMemoryCost(b *testing.B) {
	const streams, producers = 1000, 200
	k := depstest.Kafka(b, deps.KafkaFake)
	topic := depstest.Topic(b, k, 3)
	grpcAddr := testkit.FreeAddr(b)
	var log testkit.SyncBuffer
	p, err := depstest.Sandbox(b).Start(context.Background(), sandbox.Spec{
		Name: "databus-cost", Path: testkit.Binary(b, "./cmd/databus"), Stdout: &log, Stderr: &log,
		Args: []string{"--brokers", strings.Join(k.Brokers, ","), "--grpc-addr", grpcAddr, "--http-addr", testkit.FreeAddr(b),
			"--max-streams", "5000", "--max-kafka-clients", "1000"},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// rss settles for a second, then averages the gateway's RSS over one.
	rss := func() float64 {
		time.Sleep(time.Second)
		m := p.Measure()
		time.Sleep(time.Second)
		return m.Stop().RSSMBAvg * (1 << 20)
	}
	open := func(n int, aggregation bool) {
		for i := range n {
			c, err := databus.Dial(grpcAddr)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			pub, err := c.NewPublisher(ctx, topic, databus.Aggregation(aggregation))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { pub.Close() })
			if err := pub.Publish(ctx, databus.Message{Value: fmt.Appendf(nil, "%d", i)}); err != nil {
				b.Fatalf("%v\n%s", err, log.String())
			}
		}
	}
	testkit.EventuallyNil(b, 30*time.Second, "the gateway serves", func() error {
		c, err := databus.Dial(grpcAddr)
		if err != nil {
			return err
		}
		defer c.Close()
		pub, err := c.NewPublisher(ctx, topic)
		if err != nil {
			return err
		}
		defer pub.Close()
		return pub.Publish(ctx, databus.Message{Value: []byte("warm up")})
	})
	base := rss()
	open(streams, true)
	withStreams := rss()
	open(producers, false)
	withProducers := rss()
	perStream := (withStreams - base) / streams
	perProducer := (withProducers-withStreams)/producers - perStream
	for b.Loop() {
	}
	b.ReportMetric(base/(1<<20), "MiB/base")
	b.ReportMetric(perStream/(1<<10), "KiB/stream")
	b.ReportMetric(perProducer/(1<<10), "KiB/producer")
}
