package gateway

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMemberFetchLimitsFranzAccepts: every --fetch-max-bytes the flag
// takes gives a member fetch and read limits franz-go accepts (it refuses
// a read limit above 1 GiB or below the fetch's: at 50 MB, 32
// partitions' worth used to pass both).
func TestMemberFetchLimitsFranzAccepts(t *testing.T) {
	for _, per := range []int32{1024, 32 << 10, 1 << 20, 50 << 20, 1 << 30, 1<<31 - 1} {
		opts := append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t")}, memberFetchLimits(per)...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Errorf("--fetch-max-bytes %d: %v", per, err)
			continue
		}
		cl.Close()
	}
}
