package gateway_test

import (
	"errors"
	"testing"

	"github.com/highload-lab/hlab/internal/gateway"
)

func TestSizeLimits(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                  string
		limit, gatewayBytes   int64
		streams, clients      int // given; 0: not given
		wantStreams, wantCli  int
		wantSized, wantRefuse bool
	}{
		{name: "no limit keeps the defaults", gatewayBytes: 256 * mib, wantStreams: 12000, wantCli: 1024},
		{name: "given values stay, whatever the limit", limit: 300 * mib, gatewayBytes: 256 * mib, streams: 500, clients: 50, wantStreams: 500, wantCli: 50},
		// 1 GiB less 10% (102.4 MiB), 64 MiB and 256 MiB leaves 601.6 MiB,
		// shared 12,000:1,024 at 50 KiB and 1 MiB (1,609.9 MiB for both
		// defaults): 4,484 and 382.
		{name: "the k8s pod's old 1 GiB", limit: 1024 * mib, gatewayBytes: 256 * mib, wantStreams: 4484, wantCli: 382, wantSized: true},
		// Less held for message bytes leaves more for streams and clients.
		{name: "1 GiB with 64 MiB of message bytes", limit: 1024 * mib, gatewayBytes: 64 * mib, wantStreams: 5915, wantCli: 504, wantSized: true},
		// The k8s manifest's 2 GiB: 1,523.2 MiB to share.
		{name: "2 GiB", limit: 2048 * mib, gatewayBytes: 256 * mib, wantStreams: 11353, wantCli: 968, wantSized: true},
		{name: "2.5 GiB fits the defaults", limit: 2560 * mib, gatewayBytes: 256 * mib, wantStreams: 12000, wantCli: 1024, wantSized: true},
		{name: "a large pod keeps the defaults", limit: 64 << 30, gatewayBytes: 256 * mib, wantStreams: 12000, wantCli: 1024, wantSized: true},
		{name: "one given: the other sized alone", limit: 1024 * mib, gatewayBytes: 256 * mib, clients: 100, wantStreams: 4484, wantCli: 100, wantSized: true},
		{name: "a limit the message bytes fill is refused", limit: 300 * mib, gatewayBytes: 256 * mib, wantRefuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := gateway.SizeLimits(tc.limit, tc.gatewayBytes, tc.streams, tc.clients)
			if tc.wantRefuse {
				if !errors.Is(err, gateway.ErrBadLimit) {
					t.Fatalf("SizeLimits = %+v, %v; want ErrBadLimit", s, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.MaxStreams != tc.wantStreams || s.MaxKafkaClients != tc.wantCli || s.Sized != tc.wantSized {
				t.Errorf("SizeLimits = streams %d, clients %d, sized %v; want %d, %d, %v",
					s.MaxStreams, s.MaxKafkaClients, s.Sized, tc.wantStreams, tc.wantCli, tc.wantSized)
			}
		})
	}
}

// TestSizedLimitsFit checks the promise behind the sizing: every stream
// and every Kafka client the limits allow, at their costs, with the
// message bytes and the base, fits in the limit less the headroom.
func TestSizedLimitsFit(t *testing.T) {
	for limit := int64(384 << 20); limit <= 8<<30; limit += 37 << 20 {
		for _, gb := range []int64{16 << 20, 64 << 20, 256 << 20} {
			s, err := gateway.SizeLimits(limit, gb, 0, 0)
			if err != nil {
				continue
			}
			used := int64(s.MaxStreams)*gateway.StreamCost + int64(s.MaxKafkaClients)*gateway.ProducerCost + gateway.BaseCost + gb
			if plan := limit - int64(float64(limit)*gateway.SizingHeadroom); used > plan {
				t.Errorf("limit %d MiB, %d MiB of message bytes: %d streams and %d clients need %d MiB, over the %d MiB planned",
					limit>>20, gb>>20, s.MaxStreams, s.MaxKafkaClients, used>>20, plan>>20)
			}
			if s.MaxStreams < 1 || s.MaxKafkaClients < 2 {
				t.Errorf("limit %d MiB: %+v below the least that works", limit>>20, s)
			}
		}
	}
}
