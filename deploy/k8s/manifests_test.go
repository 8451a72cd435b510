// Package k8s_test checks the Kubernetes manifests against the gateway
// they run.
package k8s_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/gateway"
)

// TestPodMemoryFitsItsLimits: the deployment's memory limit is what the
// gateway sizes --max-streams and --max-kafka-clients from; at that limit
// it must hold the report's 10,000 connections per pod, the request must
// equal the limit (the pod is planned for its worst case), and the
// comment beside them must give the figures the gateway will choose.
func TestPodMemoryFitsItsLimits(t *testing.T) {
	b, err := os.ReadFile("deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(b)
	for _, flag := range []string{"--max-streams=", "--max-kafka-clients=", "--max-gateway-bytes="} {
		if strings.Contains(manifest, flag) {
			t.Fatalf("deployment.yaml sets %s: update this test's arithmetic to it", flag)
		}
	}
	request, limit := memoryOf(t, manifest, "requests:"), memoryOf(t, manifest, "limits:")
	if request != limit {
		t.Errorf("memory request %d MiB, limit %d MiB: the gateway plans for its limit, so request it", request>>20, limit>>20)
	}
	s, err := gateway.SizeLimits(limit, gateway.DefaultMaxGatewayBytes, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxStreams < 10000 {
		t.Errorf("at %d MiB the gateway allows %d streams, fewer than the report's 10,000 connections per pod", limit>>20, s.MaxStreams)
	}
	plain := strings.ReplaceAll(manifest, ",", "") // 11,353 reads as 11353
	for _, n := range []int{s.MaxStreams, s.MaxKafkaClients} {
		if !strings.Contains(plain, strconv.Itoa(n)) {
			t.Errorf("deployment.yaml's comment does not give %d, which the gateway chooses at %d MiB (%d streams, %d Kafka clients)", n, limit>>20, s.MaxStreams, s.MaxKafkaClients)
		}
	}
	t.Logf("%d MiB: %d streams, %d Kafka clients", limit>>20, s.MaxStreams, s.MaxKafkaClients)
}

// memoryOf returns the memory quantity (Mi or Gi) under the first line
// that is section ("requests:" or "limits:") in a resources block.
func memoryOf(t *testing.T, manifest, section string) int64 {
	t.Helper()
	in := false
	for _, line := range strings.Split(manifest, "\n") {
		l := strings.TrimSpace(line)
		if l == section {
			in = true
			continue
		}
		if v, ok := strings.CutPrefix(l, "memory:"); ok && in {
			v = strings.Trim(strings.TrimSpace(v), `"`)
			for suffix, unit := range map[string]int64{"Mi": 1 << 20, "Gi": 1 << 30} {
				if n, ok := strings.CutSuffix(v, suffix); ok {
					f, err := strconv.ParseFloat(n, 64)
					if err != nil {
						t.Fatalf("memory %q under %s: %v", v, section, err)
					}
					return int64(f * float64(unit))
				}
			}
			t.Fatalf("memory %q under %s: give it in Mi or Gi", v, section)
		}
	}
	t.Fatalf("deployment.yaml has no memory under %s", section)
	return 0
}
