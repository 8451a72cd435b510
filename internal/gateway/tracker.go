package gateway

import (
	"math/bits"
	"sync"
)

// partitionTracker follows the messages of one partition delivered to a
// subscriber, and says how far the group may commit: up to the highest
// offset below which every delivered message was acked. Clients may ack in
// any order; an offset acked past a gap never moves the commit point over
// the gap. Kafka offsets can skip (compaction, transaction markers), so it
// tracks the delivered offsets themselves, not ranges.
//
// What it holds is the window from the oldest unacked offset to the newest
// delivered one, acked or not: that window, not the unacked count, is what
// a stream's cap bounds (one message never acked would otherwise let the
// window, and memory, grow with every later ack). The window is a ring of
// offsets in delivery (= offset) order: an ack finds its offset by binary
// search, O(log n), and the commit point advances by dropping acked
// entries from the front, O(1) each, without moving the rest. The ring
// doubles when full and halves when a quarter full, so its memory follows
// the window. A window that fills with a batch and empties with its acks,
// as a drain's does, would allocate a ring at every doubling and halving
// of every cycle: rings left behind go to a pool by size (rings), which
// the next growth takes them from.
//
// It is not safe for concurrent use; its owner guards it.
type partitionTracker struct {
	ring  []trackedOffset // len is 0 or a power of two
	head  int             // index of the oldest entry
	n     int             // entries held
	acked int             // acked entries held (behind a gap)
	// waiting are entries nacked and waiting for their redelivery: they
	// hold the commit point, as unacked ones do, but no client has them
	// to ack (a draining stream does not wait for them).
	waiting int
	// commit is the offset to commit next (one past the last offset in
	// the acked prefix); -1 until something was acked. epoch is the leader
	// epoch of the record just before it, which Kafka keeps with a commit.
	commit int64
	epoch  int32
	// marks are when deliveries happened: the first offset of each
	// response's records of this partition, and the time (Unix ns) it
	// was sent, oldest first; the oldest unacked message was delivered at
	// the time of the last mark at or before the window's front. One mark
	// per response, not per message, keeps what this costs small.
	marks []deliveryMark
}

type deliveryMark struct{ offset, at int64 }

type trackedOffset struct {
	offset int64
	epoch  int32
	state  offsetState
}

// offsetState is where a delivered offset stands. Its zero value is
// "delivered, not yet acked".
type offsetState uint8

const (
	stateUnacked offsetState = iota
	stateAcked
	stateWaiting // nacked: it waits for its redelivery or its dead letter
)

const minRing = 16

func newPartitionTracker() *partitionTracker {
	return &partitionTracker{commit: -1, epoch: -1}
}

func (t *partitionTracker) at(i int) *trackedOffset {
	return &t.ring[(t.head+i)&(len(t.ring)-1)]
}

// deliver records that offset was sent to the client. Offsets must come in
// increasing order, as a partition's fetches return them.
func (t *partitionTracker) deliver(offset int64, epoch int32) {
	if t.n == len(t.ring) {
		t.resize(max(minRing, 2*len(t.ring)))
	}
	*t.at(t.n) = trackedOffset{offset: offset, epoch: epoch}
	t.n++
}

// ack marks offset acked and advances the commit point over the acked
// prefix. It reports whether offset was held and not yet acked (an unknown
// or repeated ack changes nothing), and how many offsets the commit point
// passed, which leave the window.
func (t *partitionTracker) ack(offset int64) (ok bool, released int) {
	e := t.find(offset)
	if e == nil || e.state != stateUnacked {
		return false, 0
	}
	e.state = stateAcked
	t.acked++
	return true, t.advance()
}

// advance moves the commit point over the acked prefix and returns how
// many offsets it passed.
func (t *partitionTracker) advance() (released int) {
	for t.n > 0 {
		front := t.at(0)
		if front.state != stateAcked {
			break
		}
		t.commit, t.epoch = front.offset+1, front.epoch
		*front = trackedOffset{}
		t.head = (t.head + 1) & (len(t.ring) - 1)
		t.n--
		t.acked--
		released++
	}
	if len(t.ring) > minRing && t.n <= len(t.ring)/4 {
		t.resize(len(t.ring) / 2)
	}
	if released > 0 {
		t.pruneMarks()
	}
	return released
}

// find returns the entry of offset, or nil when the window does not hold
// it.
func (t *partitionTracker) find(offset int64) *trackedOffset {
	lo, hi := 0, t.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if t.at(mid).offset < offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == t.n || t.at(lo).offset != offset {
		return nil
	}
	return t.at(lo)
}

// nack marks an unacked offset waiting for its redelivery. It reports
// whether offset was held and unacked.
func (t *partitionTracker) nack(offset int64) bool {
	e := t.find(offset)
	if e == nil || e.state != stateUnacked {
		return false
	}
	e.state = stateWaiting
	t.waiting++
	return true
}

// redeliver marks a waiting offset unacked again: it was sent again.
func (t *partitionTracker) redeliver(offset int64) bool {
	e := t.find(offset)
	if e == nil || e.state != stateWaiting {
		return false
	}
	e.state = stateUnacked
	t.waiting--
	return true
}

// isWaiting says whether offset is held and waiting.
func (t *partitionTracker) isWaiting(offset int64) bool {
	e := t.find(offset)
	return e != nil && e.state == stateWaiting
}

// ackWaiting acks a waiting offset (its dead letter is stored), as ack
// does an unacked one.
func (t *partitionTracker) ackWaiting(offset int64) (ok bool, released int) {
	e := t.find(offset)
	if e == nil || e.state != stateWaiting {
		return false, 0
	}
	e.state = stateAcked
	t.waiting--
	t.acked++
	return true, t.advance()
}

// eachUnacked calls fn with every unacked offset held.
func (t *partitionTracker) eachUnacked(fn func(offset int64)) {
	for i := range t.n {
		if e := t.at(i); e.state == stateUnacked {
			fn(e.offset)
		}
	}
}

func (t *partitionTracker) resize(size int) {
	ring := getRing(size)
	for i := range t.n {
		ring[i] = *t.at(i)
	}
	putRing(t.ring)
	t.ring, t.head = ring, 0
}

// rings are the trackers' rings no tracker uses, by size: rings[k] holds
// rings of 1<<k entries. An entry beyond a tracker's n is never read
// before deliver writes it, so a ring is reused as it was left.
var rings [bits.UintSize]sync.Pool // of *[]trackedOffset

// getRing returns a ring of size entries (a power of two).
func getRing(size int) []trackedOffset {
	if r, ok := rings[bits.Len(uint(size))-1].Get().(*[]trackedOffset); ok {
		return *r
	}
	return make([]trackedOffset, size)
}

// putRing gives ring, which no tracker uses any more, to the pool.
func putRing(ring []trackedOffset) {
	if len(ring) == 0 {
		return
	}
	rings[bits.Len(uint(len(ring)))-1].Put(&ring)
}

// held is how many offsets the window holds: delivered and not yet passed
// by the commit point.
func (t *partitionTracker) held() int { return t.n }

// unacked is how many delivered messages wait for an ack: not those
// waiting for their redelivery.
func (t *partitionTracker) unacked() int { return t.n - t.acked - t.waiting }

// first returns the oldest offset held: where a new reader of the
// partition must start so that nothing unacked is skipped.
func (t *partitionTracker) first() (int64, bool) {
	if t.n == 0 {
		return 0, false
	}
	return t.at(0).offset, true
}

// reset forgets the window (its messages will be delivered again from
// first) and keeps the commit point.
func (t *partitionTracker) reset() {
	putRing(t.ring)
	t.ring, t.head, t.n, t.acked, t.waiting, t.marks = nil, 0, 0, 0, 0, nil
}

// stamp records that the offset delivered last was sent at (Unix ns). The
// sender calls it after each deliver; only the first offset of a
// response, the first with a new time, makes a mark.
func (t *partitionTracker) stamp(at int64) {
	if t.n == 0 || len(t.marks) > 0 && t.marks[len(t.marks)-1].at == at {
		return
	}
	t.marks = append(t.marks, deliveryMark{offset: t.at(t.n - 1).offset, at: at})
}

// pruneMarks drops the marks of deliveries wholly behind the window's
// front.
func (t *partitionTracker) pruneMarks() {
	if t.n == 0 {
		t.marks = nil
		return
	}
	front := t.at(0).offset
	i := 0
	for i+1 < len(t.marks) && t.marks[i+1].offset <= front {
		i++
	}
	t.marks = t.marks[i:]
}

// oldestUnacked returns when (Unix ns) the oldest unacked message was
// sent: the window's front is never acked, as the acked prefix leaves it
// (it may be waiting for its redelivery: it holds the commit point too).
func (t *partitionTracker) oldestUnacked() (int64, bool) {
	if t.n == 0 || len(t.marks) == 0 {
		return 0, false
	}
	return t.marks[0].at, true
}
