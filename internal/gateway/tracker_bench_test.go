package gateway

import "testing"

// BenchmarkTrackerWindowCycle fills a partition's window with a batch of
// deliveries and acks them all, as a subscriber draining a topic does:
// the ring doubles up to the window and halves back down each cycle.
func BenchmarkTrackerWindowCycle(b *testing.B) {
	t := newPartitionTracker()
	off := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		for i := range int64(300) {
			t.deliver(off+i, 0)
		}
		for i := range int64(300) {
			t.ack(off + i)
		}
		off += 300
	}
}
