package checker

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/bits"
	"sync"
	"time"
)

// ID names one published message: its stream and its sequence number on
// that stream (0, 1, 2, ...).
type ID struct {
	Stream int
	Seq    int64
}

func (id ID) String() string { return fmt.Sprintf("%d/%d", id.Stream, id.Seq) }

// metaHeader is the header every checker message carries: the run it
// belongs to, its ID and when it was sent, so a consumer can tell this
// run's messages from older ones in the topic, check them off and
// measure end-to-end latency.
const metaHeader = "databus-checker"

const metaLen = 8 + 4 + 8 + 8 // run, stream, seq, sent (Unix ns)

func encodeMeta(run uint64, id ID, sent time.Time) []byte {
	b := make([]byte, metaLen)
	binary.BigEndian.PutUint64(b[0:], run)
	binary.BigEndian.PutUint32(b[8:], uint32(id.Stream))
	binary.BigEndian.PutUint64(b[12:], uint64(id.Seq))
	binary.BigEndian.PutUint64(b[20:], uint64(sent.UnixNano()))
	return b
}

func decodeMeta(b []byte) (run uint64, id ID, sent time.Time, ok bool) {
	if len(b) != metaLen {
		return 0, ID{}, time.Time{}, false
	}
	run = binary.BigEndian.Uint64(b[0:])
	id = ID{Stream: int(binary.BigEndian.Uint32(b[8:])), Seq: int64(binary.BigEndian.Uint64(b[12:]))}
	sent = time.Unix(0, int64(binary.BigEndian.Uint64(b[20:])))
	return run, id, sent, true
}

// bitset is a growable set of sequence numbers.
type bitset []uint64

func (b *bitset) set(i int64) (was bool) {
	w := int(i >> 6)
	if w >= len(*b) {
		*b = append(*b, make([]uint64, w-len(*b)+1+len(*b)/4)...)
	}
	m := uint64(1) << (i & 63)
	was = (*b)[w]&m != 0
	(*b)[w] |= m
	return was
}

func (b bitset) has(i int64) bool {
	w := int(i >> 6)
	return w < len(b) && b[w]&(1<<(i&63)) != 0
}

func (b bitset) count() int64 {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}

// ledger is the delivery check: which messages Kafka acknowledged to the
// publishers, and which each consumer group received (and its member
// acked: consumers record a batch only once its ack is sent). A message
// acked and never received by some group is lost; one received twice by
// a group is a duplicate (allowed: delivery is at least once).
//
// With dead letters (Config.MaxDeliveries) a message counts once across
// the topic and its dead-letter topic: poison messages must be
// dead-lettered (not: lost), the others received; a message dead-lettered
// and received, or dead-lettered twice, is a dead-letter duplicate, and a
// message that is not poison and was dead-lettered is wrong.
type ledger struct {
	acked  []streamAcks
	groups []*groupRecv
	// poison are the messages always nacked, by stream (nil: none).
	poison []bitset
}

type streamAcks struct {
	mu   sync.Mutex
	bits bitset
}

type groupRecv struct {
	mu         sync.Mutex
	bits       []bitset // by stream
	received   int64    // distinct messages of this run
	duplicates int64
	foreign    int64 // messages of this run naming a stream that does not exist
	// dead are the messages the group dead-lettered, by stream;
	// deadAgain counts the dead letters of a message already seen there.
	dead      []bitset
	deadAgain int64
	// deadCounts counts the group's dead letters by their delivery count.
	deadCounts map[uint32]int64
}

func newLedger(streams, groups int) *ledger {
	l := &ledger{acked: make([]streamAcks, streams)}
	for range groups {
		l.groups = append(l.groups, &groupRecv{bits: make([]bitset, streams), dead: make([]bitset, streams), deadCounts: map[uint32]int64{}})
	}
	return l
}

// setPoison marks ids as the messages always nacked, which must end in
// the dead-letter topic rather than be received.
func (l *ledger) setPoison(ids []ID) {
	l.poison = make([]bitset, len(l.acked))
	for _, id := range ids {
		if id.Stream < len(l.poison) {
			l.poison[id.Stream].set(id.Seq)
		}
	}
}

// deadLetter records that group dead-lettered id, with deliveryCount
// its delivery count then.
func (l *ledger) deadLetter(group int, id ID, deliveryCount uint32) {
	g := l.groups[group]
	g.mu.Lock()
	defer g.mu.Unlock()
	if id.Stream < 0 || id.Stream >= len(g.dead) || id.Seq < 0 {
		g.foreign++
		return
	}
	g.deadCounts[deliveryCount]++
	if g.dead[id.Stream].set(id.Seq) {
		g.deadAgain++
	}
}

// poisonCount is how many poison messages were acked to the publishers.
func (l *ledger) poisonCount() int64 {
	var n int64
	for s := range l.poison {
		a := &l.acked[s]
		a.mu.Lock()
		for w := range min(len(a.bits), len(l.poison[s])) {
			n += int64(bits.OnesCount64(a.bits[w] & l.poison[s][w]))
		}
		a.mu.Unlock()
	}
	return n
}

// ack records that Kafka stored ids, all of stream.
func (l *ledger) ack(stream int, ids []ID) {
	a := &l.acked[stream]
	a.mu.Lock()
	for _, id := range ids {
		a.bits.set(id.Seq)
	}
	a.mu.Unlock()
}

// ackRange records that Kafka holds sequence numbers [from, to) of
// stream: Consume Only's records, by partition and offset.
func (l *ledger) ackRange(stream int, from, to int64) {
	a := &l.acked[stream]
	a.mu.Lock()
	for seq := from; seq < to; seq++ {
		a.bits.set(seq)
	}
	a.mu.Unlock()
}

// receive records that group received ids.
func (l *ledger) receive(group int, ids []ID) {
	g := l.groups[group]
	g.mu.Lock()
	for _, id := range ids {
		if id.Stream < 0 || id.Stream >= len(g.bits) || id.Seq < 0 {
			g.foreign++
			continue
		}
		if g.bits[id.Stream].set(id.Seq) {
			g.duplicates++
		} else {
			g.received++
		}
	}
	g.mu.Unlock()
}

// ackedCount is how many distinct messages were acked.
func (l *ledger) ackedCount() int64 {
	var n int64
	for i := range l.acked {
		n += l.ackedOf(i)
	}
	return n
}

// ackedOf is how many distinct messages of stream were acked.
func (l *ledger) ackedOf(stream int) int64 {
	a := &l.acked[stream]
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bits.count()
}

// groupReport is what one group missed.
type groupReport struct {
	lost, duplicates, unackedReceived, received int64
	sample                                      []ID // the first lost messages
	// deadLettered are the distinct messages the group dead-lettered;
	// deadDuplicates those dead-lettered and received too, and the
	// dead letters of a message dead-lettered already; deadWrong the
	// messages dead-lettered that are not poison.
	deadLettered, deadDuplicates, deadWrong int64
	deadCounts                              map[uint32]int64
}

// check compares group's receipts with the acks. It keeps up to
// sampleMax lost IDs.
func (l *ledger) check(group, sampleMax int) groupReport {
	g := l.groups[group]
	var r groupReport
	for s := range l.acked {
		a := &l.acked[s]
		a.mu.Lock()
		g.mu.Lock()
		acked, recv, dead := a.bits, g.bits[s], g.dead[s]
		var poison bitset
		if l.poison != nil {
			poison = l.poison[s]
		}
		for w := range max(len(acked), len(recv), len(dead)) {
			aw, rw, dw, pw := acked.word(w), recv.word(w), dead.word(w), poison.word(w)
			// A poison message is only counted in the dead-letter topic;
			// any other in either.
			missing := aw&^pw&^(rw|dw) | aw&pw&^dw
			r.lost += int64(bits.OnesCount64(missing))
			r.unackedReceived += int64(bits.OnesCount64((rw | dw) &^ aw))
			r.deadLettered += int64(bits.OnesCount64(dw))
			r.deadDuplicates += int64(bits.OnesCount64(dw & rw))
			r.deadWrong += int64(bits.OnesCount64(dw &^ pw))
			for missing != 0 && len(r.sample) < sampleMax {
				b := bits.TrailingZeros64(missing)
				r.sample = append(r.sample, ID{Stream: s, Seq: int64(w*64 + b)})
				missing &^= 1 << b
			}
		}
		g.mu.Unlock()
		a.mu.Unlock()
	}
	g.mu.Lock()
	r.duplicates, r.received = g.duplicates, g.received
	r.deadDuplicates += g.deadAgain
	r.deadCounts = maps.Clone(g.deadCounts)
	g.mu.Unlock()
	return r
}

// word is b's w-th word, 0 beyond its end.
func (b bitset) word(w int) uint64 {
	if w < len(b) {
		return b[w]
	}
	return 0
}

// complete reports whether every group received every acked message.
func (l *ledger) complete() bool {
	for g := range l.groups {
		if l.check(g, 0).lost > 0 {
			return false
		}
	}
	return true
}
