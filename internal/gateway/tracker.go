package gateway

import "sort"

// partitionTracker follows the messages of one partition delivered to one
// subscriber, and says how far the group may commit: up to the highest
// offset below which every delivered message was acked. Clients may ack in
// any order; an offset acked past a gap never moves the commit point over
// the gap. Kafka offsets can skip (compaction, transaction markers), so it
// tracks the delivered offsets themselves, not ranges.
//
// It is not safe for concurrent use; the subscription guards it.
type partitionTracker struct {
	// pending holds delivered offsets in delivery (= offset) order; acked
	// marks which of them the client acked. Committed entries are dropped
	// from the front.
	pending []int64
	acked   map[int64]bool
	epoch   int32 // leader epoch of the newest delivered record
	// commit is the offset to commit next (one past the last offset in
	// the acked prefix); -1 until something was acked.
	commit int64
}

func newPartitionTracker() *partitionTracker {
	return &partitionTracker{acked: map[int64]bool{}, commit: -1}
}

// deliver records that offset was sent to the client. Offsets must come in
// increasing order, as a partition's fetches return them.
func (t *partitionTracker) deliver(offset int64, epoch int32) {
	t.pending = append(t.pending, offset)
	t.epoch = epoch
}

// ack marks offset acked and advances the commit point over the acked
// prefix. It reports whether offset was pending (an unknown or repeated ack
// changes nothing).
func (t *partitionTracker) ack(offset int64) bool {
	i := sort.Search(len(t.pending), func(i int) bool { return t.pending[i] >= offset })
	if i == len(t.pending) || t.pending[i] != offset || t.acked[offset] {
		return false
	}
	t.acked[offset] = true
	n := 0
	for n < len(t.pending) && t.acked[t.pending[n]] {
		delete(t.acked, t.pending[n])
		n++
	}
	if n > 0 {
		t.commit = t.pending[n-1] + 1
		t.pending = append(t.pending[:0], t.pending[n:]...)
	}
	return true
}

// unacked is how many delivered messages wait for an ack.
func (t *partitionTracker) unacked() int { return len(t.pending) - len(t.acked) }
