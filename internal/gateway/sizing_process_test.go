package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
