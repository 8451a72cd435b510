package gateway

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The retry reader: how a due retry gets its record back.
//
// The gateway does not keep a delivered record's bytes, so a nacked
// message whose delay ended is fetched again, by a Kafka client of the
// member's own outside the group (no group, no commits): the member's
// fetch position is never moved for a retry, so retries cannot disturb
// what the group's partitions deliver next, their pauses, or their
// queues. Per partition the reader is asked for a set of offsets; it
// consumes the partition from the smallest and hands each asked record
// over as it comes (retryReader.handOverLocked): to the partition's
// owner stream, which sends it before its queue, or to its dead-letter
// topic. An asked offset that a later record passes no longer exists in
// Kafka (retention or compaction removed it): it cannot be delivered, so
// it is logged, counted (databus_retries_vanished_total) and acked, or
// the commit point would wait for it forever. Once a partition's asks are
// all handed over or passed, the reader stops consuming it.
//
// The reader is made when the member first needs it and ends after
// retryReaderIdle with nothing asked, or with the member. It takes no
// --max-kafka-clients place of its own: it is part of its member, which
// so uses two clients' connections while it has retries.

// retryReaderIdle is how long a retry reader with nothing asked keeps
// its client.
const retryReaderIdle = time.Minute

type retryReader struct {
	m    *member
	cl   *kgo.Client
	wake chan struct{} // an ask came
	done chan struct{} // closed when run returned and the client is closed

	// Guarded by m.mu.
	parts      map[int32]*refetchPart
	pollCancel context.CancelFunc // ends the poll in progress
}

// refetchPart is what the reader is asked of one partition. m.mu guards it.
type refetchPart struct {
	asks map[int64]*retry
	// reading: the client consumes the partition; next is the offset
	// after the last record it returned (or where the read was set), so
	// an ask below it needs the read set back.
	reading bool
	next    int64
	// setTo, when >= 0, is where the loop must set the read before it
	// polls again.
	setTo int64
}

// askRefetchLocked has the retry reader fetch rt's record again, making
// the reader if the member has none. m.mu is held.
func (m *member) askRefetchLocked(rt *retry) {
	rr := m.reader
	if rr == nil {
		// An offset retention removed is read on from the log's start,
		// where the records passing it tell it is gone.
		cl, err := newClient(m.g.kafkaOpts(outsideGroupOpts(m.g.cfg, m.g.cfg.isolationLevel())...))
		if err != nil { // the member's own client took the same options
			m.g.log.Error("databus: retry reader not made; nacked messages wait in their window", "group", m.key.group, "err", err)
			return
		}
		rr = &retryReader{m: m, cl: cl, wake: make(chan struct{}, 1), done: make(chan struct{}), parts: map[int32]*refetchPart{}}
		m.reader = rr
		go rr.run()
	}
	rp := rr.parts[rt.p.id]
	if rp == nil {
		rp = &refetchPart{asks: map[int64]*retry{}, setTo: -1}
		rr.parts[rt.p.id] = rp
	}
	rp.asks[rt.offset] = rt
	if !rp.reading || rt.offset < rp.next {
		if rp.setTo < 0 || rt.offset < rp.setTo {
			rp.setTo = rt.offset
		}
	}
	if rr.pollCancel != nil {
		rr.pollCancel()
	}
	select {
	case rr.wake <- struct{}{}:
	default:
	}
}

// stopRetryReader ends the member's retry reader and waits for it (the
// member closes: its context ended).
func (m *member) stopRetryReader() {
	m.mu.Lock()
	rr := m.reader
	m.reader = nil
	m.mu.Unlock()
	if rr != nil {
		<-rr.done
	}
}

// run sets the client's reads as asked, polls (m.mu not held, within
// --kafka-timeout), and hands over what came, until the member closes or
// nothing was asked for retryReaderIdle.
func (rr *retryReader) run() {
	m := rr.m
	defer close(rr.done)
	defer rr.cl.Close()
	idleSince := time.Now()
	for {
		m.mu.Lock()
		if m.ctx.Err() != nil {
			m.mu.Unlock()
			return
		}
		add, remove := rr.planLocked()
		reading := len(rr.parts) > 0
		if !reading && time.Since(idleSince) >= retryReaderIdle {
			if m.reader == rr {
				m.reader = nil
			}
			m.mu.Unlock()
			return
		}
		var pctx context.Context
		var cancel context.CancelFunc
		if reading {
			pctx, cancel = context.WithTimeout(m.ctx, m.g.cfg.KafkaTimeout)
			rr.pollCancel = cancel
		}
		m.mu.Unlock()

		topic := m.key.topic
		if len(remove) > 0 {
			rr.cl.RemoveConsumePartitions(map[string][]int32{topic: remove})
		}
		if len(add) > 0 {
			rr.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: add})
		}
		if !reading {
			select {
			case <-rr.wake:
			case <-time.After(retryReaderIdle - time.Since(idleSince)):
			case <-m.ctx.Done():
			}
			continue
		}
		fetches := rr.cl.PollFetches(pctx)
		cancel()
		if fetches.IsClientClosed() {
			return
		}
		m.mu.Lock()
		rr.pollCancel = nil
		rr.handleLocked(fetches)
		if len(rr.parts) == 0 {
			idleSince = time.Now()
		}
		m.mu.Unlock()
	}
}

// planLocked forgets asks whose retry is gone, and returns the reads to
// stop and those to start (a read set back is both). m.mu is held.
func (rr *retryReader) planLocked() (add map[int32]kgo.Offset, remove []int32) {
	for id, rp := range rr.parts {
		for off, rt := range rp.asks {
			if !rt.stillAsked() {
				delete(rp.asks, off)
			}
		}
		if len(rp.asks) == 0 {
			if rp.reading {
				remove = append(remove, id)
			}
			delete(rr.parts, id)
			continue
		}
		if rp.setTo < 0 {
			continue
		}
		// A read is set back by removing the partition and adding it
		// again: SetOffsets skips a partition whose start offset is still
		// being loaded (just added), which would read on past the ask.
		// Removing it also discards what was buffered of it.
		if rp.reading {
			remove = append(remove, id)
		}
		if add == nil {
			add = map[int32]kgo.Offset{}
		}
		add[id] = kgo.NewOffset().At(rp.setTo)
		rp.reading, rp.next, rp.setTo = true, rp.setTo, -1
	}
	return add, remove
}

// stillAsked says whether rt still wants its record: it is its
// partition's retry, due, and neither written as a dead letter nor
// handed over yet. m.mu is held.
func (rt *retry) stillAsked() bool {
	return !rt.dropped && rt.fired && !rt.producing && rt.rec == nil && rt.p.retries[rt.offset] == rt
}

// handleLocked hands over the asked records of fetches, and settles the
// asks they passed. m.mu is held.
func (rr *retryReader) handleLocked(fetches kgo.Fetches) {
	m := rr.m
	fetches.EachError(func(topic string, partition int32, err error) {
		if !isContextErr(err) {
			m.g.log.Warn("databus: retry reader's fetch error", "group", m.key.group, "topic", topic, "partition", partition, "err", err)
		}
	})
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		rp := rr.parts[fp.Partition]
		if fp.Topic != m.key.topic || rp == nil || !rp.reading || rp.setTo >= 0 || len(fp.Records) == 0 {
			return // a read being set back: what it brings is stale
		}
		for _, r := range fp.Records {
			if r.Offset < rp.next {
				continue
			}
			rp.next = r.Offset + 1
			if rt := rp.asks[r.Offset]; rt != nil {
				delete(rp.asks, r.Offset)
				m.handOverLocked(rt, r)
			}
		}
		for off, rt := range rp.asks {
			if off < rp.next {
				delete(rp.asks, off)
				m.vanishedLocked(rt)
			}
		}
	})
}

// handOverLocked gives a due retry its record, fetched again: queued for
// its partition's owner, or written as a dead letter, if the owner still
// holds its offset waiting (else the partition moved, and its new owner's
// fetch brings it). m.mu is held.
func (m *member) handOverLocked(rt *retry, r *kgo.Record) {
	p := rt.p
	if !rt.stillAsked() || m.parts[p.id] != p || p.owner == nil || !p.t.isWaiting(rt.offset) {
		return
	}
	if rt.deadLetter {
		m.startDeadLetterLocked(rt, r)
		return
	}
	p.owner.queueRedeliveryLocked(rt, r)
}

// vanishedLocked settles a due retry whose record Kafka no longer has:
// it is acked, so the commit point can pass it. m.mu is held.
func (m *member) vanishedLocked(rt *retry) {
	p := rt.p
	if !rt.stillAsked() || m.parts[p.id] != p || p.owner == nil || !p.t.isWaiting(rt.offset) {
		return
	}
	m.g.log.Warn("databus: a nacked message is gone from Kafka (retention or compaction) and cannot be redelivered; acked", "group", m.key.group, "topic", m.key.topic, "partition", p.id, "offset", rt.offset)
	m.g.m.retriesVanished.Inc()
	m.dropRetryLocked(rt)
	m.ackWaitingLocked(p, rt.offset)
}

// redelivery is a due retry's record, fetched again, queued for its
// partition's owner stream.
type redelivery struct {
	rt  *retry
	rec *kgo.Record
}

// queueRedeliveryLocked queues r for st, which sends it before its queue;
// its bytes count in flight until sent or dropped. m.mu is held.
func (st *subStream) queueRedeliveryLocked(rt *retry, r *kgo.Record) {
	b := recordBytes(r)
	st.redeliver = append(st.redeliver, redelivery{rt, r})
	st.redeliverBytes += b
	st.g.holdSubscribeBytes(b)
	st.kickLocked()
}

// dropRedeliveriesLocked drops st's queued redeliveries of partition id
// (all when id < 0): the partition left the stream, whose window of it is
// forgotten; its retries stay, for its next owner's fetch. m.mu is held.
func (st *subStream) dropRedeliveriesLocked(id int32) {
	if len(st.redeliver) == 0 {
		return
	}
	keep := st.redeliver[:0]
	bytes := int64(0)
	for _, e := range st.redeliver {
		if id >= 0 && e.rec.Partition != id {
			keep = append(keep, e)
			continue
		}
		bytes += recordBytes(e.rec)
	}
	clear(st.redeliver[len(keep):])
	st.redeliver = keep
	if len(keep) == 0 {
		st.redeliver = nil
	}
	st.redeliverBytes -= bytes
	st.g.releaseSubscribeBytes(bytes)
}
