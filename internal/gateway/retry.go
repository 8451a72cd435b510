package gateway

import (
	"container/heap"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Nacks and delayed redelivery.
//
// A nacked message stays in its partition's window (partitionTracker),
// waiting: the commit point never passes it, so a gateway that dies
// before the redelivery has it delivered again from the committed offset.
// The member keeps a retry per nacked message, in a heap by due time with
// one timer. The gateway does not keep a delivered record's bytes (that
// would hold every unacked message in memory), so a retry that comes due
// has its record fetched again by the member's retry reader
// (retryreader.go), a client of its own: the group's fetch position never
// moves for a retry, and the partition's later messages keep flowing.
// The record fetched again is sent to the partition's owner before its
// queue, with its delivery count, and enters no window again: its offset
// is there, waiting, and becomes unacked.
//
// A partition that moves between this gateway's streams keeps its
// retries: its window is forgotten (with the old owner's queued
// redeliveries), and the new owner fetches it again from the oldest
// offset held; a record of a retry not yet due enters the new owner's
// window waiting, without being sent, and one due is sent at once. A
// partition that leaves the member (revoked, lost) drops its retries: the
// next owner reads from the committed offset, which never passed them.
//
// Delivery counts are kept only for offsets delivered more than once
// (partState.counts), so a first delivery costs a length check.

// maxNackReason bounds what is kept of a nack's reason.
const maxNackReason = 1024

// retry is a nacked message waiting for its redelivery or its dead
// letter. It is the member's, under m.mu.
type retry struct {
	p      *partState
	offset int64
	due    time.Time
	// count is the delivery count of its redelivery, or, for a dead
	// letter, the count it was nacked at.
	count  uint32
	reason string
	// deadLetter: it goes to topic (the nacking stream's dead-letter
	// topic) instead of back to a stream.
	deadLetter bool
	topic      string
	fired      bool        // it came due
	rec        *kgo.Record // a dead letter's record, once fetched again
	producing  bool        // its dead letter is being written
	attempts   int         // dead-letter writes failed so far
	index      int         // in the member's heap; -1: not in it
	dropped    bool
}

// retryHeap orders retries by due time.
type retryHeap []*retry

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h retryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *retryHeap) Push(x any) {
	rt := x.(*retry)
	rt.index = len(*h)
	*h = append(*h, rt)
}
func (h *retryHeap) Pop() any {
	old := *h
	rt := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	rt.index = -1
	return rt
}

// deliveryCount is the delivery count of offset's current (or next)
// delivery.
func (p *partState) deliveryCount(offset int64) uint32 {
	if len(p.counts) > 0 {
		if c := p.counts[offset]; c > 0 {
			return c
		}
	}
	return 1
}

func (p *partState) setCount(offset int64, c uint32) {
	if p.counts == nil {
		p.counts = map[int64]uint32{}
	}
	p.counts[offset] = c
}

// pruneCounts forgets the counts of offsets the commit point passed.
func (p *partState) pruneCounts() {
	for o := range p.counts {
		if o < p.t.commit {
			delete(p.counts, o)
		}
	}
}

// nack applies a stream's nacks: each one held and unacked waits for its
// redelivery after its delay, or for its dead letter. A nack past
// --max-pending-retries returns the status that ends the stream.
func (m *member) nack(st *subStream, nacks []*databusv1.Nack) error {
	now := time.Now()
	var err error
	ignored, retried, dead, cut := 0, 0, 0, 0
	m.mu.Lock()
	for _, n := range nacks {
		p := st.parts[n.Partition]
		if p == nil || !p.t.nack(n.Offset) {
			ignored++
			continue
		}
		if m.g.retriesPending.Add(1) > int64(m.g.cfg.MaxPendingRetries) {
			m.g.retriesPending.Add(-1)
			p.t.redeliver(n.Offset) // unacked again: the stream's end redelivers it
			err = streamError(codes.ResourceExhausted, "this gateway holds %d nacked messages for redelivery, its --max-pending-retries: this stream ended and its messages will be delivered again; nack less, with shorter delays, or raise the limit", m.g.cfg.MaxPendingRetries)
			break
		}
		m.g.m.retriesPending.Inc()
		st.unacked--
		m.g.m.unacked.Dec()
		count := p.deliveryCount(n.Offset)
		rt := &retry{p: p, offset: n.Offset, reason: n.Reason, index: -1}
		if len(rt.reason) > maxNackReason {
			rt.reason = rt.reason[:maxNackReason]
		}
		if st.s.maxDeliveries > 0 && int(count) >= st.s.maxDeliveries {
			rt.deadLetter, rt.topic, rt.count, rt.due = true, st.s.deadLetterTopic, count, now
			dead++
		} else {
			delay := time.Duration(n.DelayMs) * time.Millisecond
			if delay > m.g.cfg.MaxNackDelay {
				delay = m.g.cfg.MaxNackDelay
				cut++
			}
			rt.count, rt.due = count+1, now.Add(delay)
			p.setCount(n.Offset, count+1)
			retried++
		}
		m.addRetryLocked(rt)
	}
	if st.draining && st.unacked == 0 {
		select { // a drain waits for no nacked message
		case st.acked <- struct{}{}:
		default:
		}
	}
	m.mu.Unlock()
	m.g.m.nacks.WithLabelValues("ignored").Add(float64(ignored))
	m.g.m.nacks.WithLabelValues("retry").Add(float64(retried))
	m.g.m.nacks.WithLabelValues("dead_letter").Add(float64(dead))
	m.g.m.nackDelaysCut.Add(float64(cut))
	return err
}

// addRetryLocked holds rt until it is due. m.mu is held.
func (m *member) addRetryLocked(rt *retry) {
	p := rt.p
	if p.retries == nil {
		p.retries = map[int64]*retry{}
	}
	p.retries[rt.offset] = rt
	m.retrying++
	m.pushRetryLocked(rt)
}

// pushRetryLocked puts rt in the heap and sets the timer for the earliest
// due time. m.mu is held.
func (m *member) pushRetryLocked(rt *retry) {
	heap.Push(&m.retryDue, rt)
	if m.retryDue[0] == rt {
		d := time.Until(rt.due)
		if m.retryTimer == nil {
			m.retryTimer = time.AfterFunc(d, m.fireRetries)
		} else {
			m.retryTimer.Reset(d)
		}
	}
}

// dropRetryLocked forgets rt: it was redelivered, dead-lettered, or its
// partition left. m.mu is held.
func (m *member) dropRetryLocked(rt *retry) {
	if rt.dropped {
		return
	}
	rt.dropped = true
	if rt.index >= 0 {
		heap.Remove(&m.retryDue, rt.index)
	}
	delete(rt.p.retries, rt.offset)
	m.retrying--
	m.g.retriesPending.Add(-1)
	m.g.m.retriesPending.Dec()
}

// dropPartRetriesLocked forgets p's retries and counts: p left the member.
// m.mu is held.
func (m *member) dropPartRetriesLocked(p *partState) {
	for _, rt := range p.retries {
		m.dropRetryLocked(rt)
	}
	p.counts = nil
}

// dropAllRetries forgets every retry (the member closes: its partitions
// go to other members from the committed offsets).
func (m *member) dropAllRetries() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.retryTimer != nil {
		m.retryTimer.Stop()
	}
	for _, p := range m.parts {
		m.dropPartRetriesLocked(p)
	}
}

// fireRetries handles the retries that came due (the timer's callback).
func (m *member) fireRetries() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing || m.ctx.Err() != nil {
		return
	}
	now := time.Now()
	for len(m.retryDue) > 0 && !m.retryDue[0].due.After(now) {
		m.fireLocked(heap.Pop(&m.retryDue).(*retry))
	}
	if len(m.retryDue) > 0 {
		m.retryTimer.Reset(time.Until(m.retryDue[0].due))
	}
}

// fireLocked handles rt, due now: a dead letter whose record is at hand
// is written; a message its partition's owner holds waiting is fetched
// again by the retry reader, which sends it on or writes its dead letter.
// One that its partition's window does not hold (the partition moved and
// is being fetched again, or has no stream) is delivered when its
// partition's fetch brings it back. m.mu is held.
func (m *member) fireLocked(rt *retry) {
	rt.fired = true
	p := rt.p
	if m.parts[p.id] != p {
		m.dropRetryLocked(rt)
		return
	}
	if rt.rec != nil {
		m.startDeadLetterLocked(rt, rt.rec)
		return
	}
	if p.owner == nil || !p.t.isWaiting(rt.offset) {
		return
	}
	m.askRefetchLocked(rt)
}

// nextWithRetries is next while the member has retries or the stream
// has redeliveries: it sends the redeliveries first, each whose retry is
// still its partition's and whose offset still waits in the stream's
// window (else it is dropped: its partition moved); then it goes through
// the whole queue, per record
//   - with a retry, new to the window (its partition moved): it enters
//     the window, waiting, unless its retry is due: then it is sent;
//   - else sent as usual, with its delivery count.
//
// Records that enter the window need room under the cap; those that do
// not fit, or past a full batch, stay queued, in order. m.mu is held.
func (st *subStream) nextWithRetries() (*databusv1.SubscribeResponse, int64) {
	m := st.m
	var out []*kgo.Record
	var counts []uint32
	sentBytes, droppedBytes := int64(0), int64(0)
	entered, redelivered := 0, 0
	now := int64(0)
	if m.g.m.on {
		now = time.Now().UnixNano()
	}
	drop := func(r *kgo.Record) { droppedBytes += recordBytes(r) }
	send := func(r *kgo.Record, count uint32) {
		out = append(out, r)
		counts = append(counts, count)
		sentBytes += recordBytes(r)
	}
	taken, redeliverBytes := 0, int64(0)
	for _, e := range st.redeliver {
		if len(out) == st.s.batchSize {
			break
		}
		taken++
		redeliverBytes += recordBytes(e.rec)
		p, rt := st.parts[e.rec.Partition], e.rt
		if p == nil || p != rt.p || p.retries[rt.offset] != rt || rt.dropped || !p.t.redeliver(rt.offset) {
			drop(e.rec)
			continue
		}
		m.dropRetryLocked(rt)
		send(e.rec, rt.count)
		redelivered++
	}
	if taken > 0 {
		clear(st.redeliver[:taken])
		st.redeliver = st.redeliver[taken:]
		if len(st.redeliver) == 0 {
			st.redeliver = nil
		}
		st.redeliverBytes -= redeliverBytes
	}
	queueBytes := int64(0) // of the queue's records sent or dropped
	keep := st.queue[:0]
	for _, r := range st.queue {
		if len(out) == st.s.batchSize || st.room()-entered <= 0 {
			keep = append(keep, r)
			continue
		}
		p := st.parts[r.Partition]
		rt := p.retries[r.Offset]
		p.t.deliver(r.Offset, r.LeaderEpoch)
		entered++
		if now != 0 {
			p.t.stamp(now)
		}
		queueBytes += recordBytes(r)
		switch {
		case rt == nil:
			send(r, p.deliveryCount(r.Offset))
		case rt.fired && !rt.deadLetter:
			m.dropRetryLocked(rt)
			send(r, rt.count)
			redelivered++
		default: // it waits for its time, or its dead letter
			p.t.nack(r.Offset)
			if rt.fired {
				m.startDeadLetterLocked(rt, r)
			}
			drop(r)
		}
	}
	clear(st.queue[len(keep):])
	st.queue = keep
	if len(keep) == 0 {
		st.queue = nil
	}
	st.queueBytes -= queueBytes
	if droppedBytes > 0 {
		st.g.releaseSubscribeBytes(droppedBytes)
	}
	st.held += entered
	st.unacked += len(out)
	m.g.m.held.Add(float64(entered))
	m.g.m.unacked.Add(float64(len(out)))
	if st.paused && !st.wantPause() {
		m.wakeLocked()
	}
	if len(out) == 0 && len(st.assignedP)+len(st.revokedP) == 0 {
		st.sending = false
		return nil, 0
	}
	resp := &databusv1.SubscribeResponse{Assigned: st.assignedP, Revoked: st.revokedP}
	st.assignedP, st.revokedP = nil, nil
	if len(out) > 0 {
		resp.Messages = consumedMessages(out)
		for i, c := range counts {
			resp.Messages[i].DeliveryCount = c
		}
		m.g.m.messagesOut.Add(float64(len(out)))
		m.g.m.bytesOut.Add(float64(sentBytes))
		m.g.m.redeliveries.Add(float64(redelivered))
	}
	return resp, sentBytes
}
