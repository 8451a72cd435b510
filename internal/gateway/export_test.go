package gateway

import (
	"testing"
	"time"
)

// SetDeliveredHook has fn see every delivery to a subscribe stream until
// the test ends: the stream's held offsets, the largest of its partition
// trackers, and its cap. fn runs under the gateway's locks: keep it short.
func SetDeliveredHook(t *testing.T, fn func(held, trackerHeld, limit int)) {
	testHookDelivered.Store(&fn)
	t.Cleanup(func() { testHookDelivered.Store(nil) })
}

// SetSlowSenderBase sets how long a granted message may take to arrive,
// before its size's allowance, for the gateways the test starts.
func SetSlowSenderBase(t *testing.T, d time.Duration) {
	old := slowSenderBase
	slowSenderBase = d
	t.Cleanup(func() { slowSenderBase = old })
}
