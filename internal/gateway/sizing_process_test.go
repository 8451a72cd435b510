package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestGatewaySizesFromItsCgroup runs the gateway process in a cgroup with
// a memory limit, as a k8s pod's container is: it finds the limit, sizes
// --max-streams and --max-kafka-clients from it and says so; under a
// limit its message bytes alone would fill, it refuses to start.
func TestGatewaySizesFromItsCgroup(t *testing.T) {
	sb := depstest.Sandbox(t)
	if sb.Mechanism() == sandbox.None {
		t.Skipf("no cgroup to put the gateway in: %s", sb.Reason())
	}
	bin := testkit.Binary(t, "./cmd/databus")
	start := func(memMB int) (*sandbox.Process, *testkit.SyncBuffer) {
		var log testkit.SyncBuffer
		p, err := sb.Start(context.Background(), sandbox.Spec{
			Name: "databus-sized", Path: bin, MemoryMB: memMB, Stdout: &log, Stderr: &log,
			Args: []string{"--echo", "--grpc-addr", testkit.FreeAddr(t), "--http-addr", testkit.FreeAddr(t)},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(time.Second) })
		return p, &log
	}

	_, log := start(1024)
	want, err := gateway.SizeLimits(1024<<20, gateway.DefaultMaxGatewayBytes, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sized struct {
		MemoryLimitMiB  int64 `json:"memory_limit_mib"`
		MaxStreams      int   `json:"max_streams"`
		MaxKafkaClients int   `json:"max_kafka_clients"`
	}
	testkit.Eventually(t, 20*time.Second, "the gateway's sizing line", func() bool {
		for _, line := range strings.Split(log.String(), "\n") {
			if strings.Contains(line, "sized from the memory limit") {
				if err := json.Unmarshal([]byte(line), &sized); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				return true
			}
		}
		return false
	})
	if sized.MemoryLimitMiB != 1024 || sized.MaxStreams != want.MaxStreams || sized.MaxKafkaClients != want.MaxKafkaClients {
		t.Errorf("the gateway found %d MiB and chose %d streams, %d clients; want 1024, %d, %d:\n%s",
			sized.MemoryLimitMiB, sized.MaxStreams, sized.MaxKafkaClients, want.MaxStreams, want.MaxKafkaClients, log.String())
	}
	t.Logf("under 1 GiB: %d streams, %d Kafka clients", want.MaxStreams, want.MaxKafkaClients)

	p, log := start(300)
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("the gateway started under 300 MiB, which its 256 MiB of message bytes nearly fill:\n%s", log.String())
	}
	// Its output may still be on its way through the sandbox's pipe.
	testkit.Eventually(t, 5*time.Second, "a refusal that says what to change (--max-gateway-bytes)", func() bool {
		return strings.Contains(log.String(), "--max-gateway-bytes")
	})
}

// TestSizedGatewayHoldsItsLimits fills every place the sizing gave a
// gateway under a 512 MiB memory cgroup (--max-gateway-bytes 64 MiB): as
// many streams as --max-streams, as many of them with a producer of their
// own as --max-kafka-clients allows, all publishing 1 KiB messages for
// HLAB_SIZED_SECONDS (20), then checks that the kernel did not kill it for
// memory and prints its peak RSS. A soak check (HLAB_SOAK=1): thousands of
// connections from this process.
func TestSizedGatewayHoldsItsLimits(t *testing.T) {
	soak(t)
	sb := depstest.Sandbox(t)
	if sb.Mechanism() == sandbox.None {
		t.Skipf("no cgroup to put the gateway in: %s", sb.Reason())
	}
	const memMB, gatewayBytes = 512, 64 << 20
	s, err := gateway.SizeLimits(memMB<<20, gatewayBytes, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := depstest.Topic(t, k, 8)
	grpcAddr := testkit.FreeAddr(t)
	var log testkit.SyncBuffer
	p, err := sb.Start(context.Background(), sandbox.Spec{
		Name: "databus-sized-full", Path: testkit.Binary(t, "./cmd/databus"), MemoryMB: memMB, Stdout: &log, Stderr: &log,
		Args: []string{"--brokers", strings.Join(k.Brokers, ","), "--grpc-addr", grpcAddr, "--http-addr", testkit.FreeAddr(t),
			"--max-gateway-bytes", strconv.Itoa(gatewayBytes), "--max-connections", strconv.Itoa(2 * s.MaxStreams)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	testkit.EventuallyNil(t, 30*time.Second, "the gateway listens", func() error {
		c, err := net.DialTimeout("tcp", grpcAddr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	meter := p.Measure()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The shared producer holds one Kafka client place.
	own := s.MaxKafkaClients - 1
	t.Logf("under %d MiB: %d streams, %d of them with a producer of their own", memMB, s.MaxStreams, own)
	pubs := make([]*databus.Publisher, s.MaxStreams)
	for i := range pubs {
		c, err := databus.Dial(grpcAddr, databus.WithBackoff(100*time.Millisecond, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if pubs[i], err = c.NewPublisher(ctx, topic, databus.Aggregation(i >= own)); err != nil {
			t.Fatal(err)
		}
		defer pubs[i].Close()
	}
	seconds := soakEnvInt(t, "HLAB_SIZED_SECONDS", 20)
	until := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	var published, failed atomic.Int64
	value := make([]byte, 1<<10)
	for _, pub := range pubs {
		wg.Go(func() {
			for time.Now().Before(until) {
				batch := make([]databus.Message, 10)
				for j := range batch {
					batch[j] = databus.Message{Value: value}
				}
				if err := pub.Publish(ctx, batch...); err != nil {
					failed.Add(1)
					select {
					case <-p.Done():
						return
					case <-time.After(100 * time.Millisecond):
					}
					continue
				}
				published.Add(int64(len(batch)))
			}
		})
	}
	wg.Wait()
	u := meter.Stop()
	select {
	case <-p.Done():
		t.Fatalf("the gateway exited under its sized limits: %v\n%s", p.ExitErr(), log.String())
	default:
	}
	t.Logf("%d messages published, %d batches failed; gateway RSS peak %.0f MiB, mean %.0f MiB, of %d MiB",
		published.Load(), failed.Load(), u.RSSMBMax, u.RSSMBAvg, memMB)
}
