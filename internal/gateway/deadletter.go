package gateway

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Dead letters: a message nacked at its stream's x-databus-max-deliveries
// goes to the stream's dead-letter topic, through the gateway's shared
// producer (acks=all, idempotent), with the headers of databus.proto's
// DeadLetter. Only once Kafka stored it is its offset acked; a gateway
// that dies before the commit delivers it again, and its next nack writes
// it again: a dead letter may be duplicated, never lost. A failed write
// is tried again after a backoff, its message still waiting in its
// partition's window.

// maxDeadLetterBackoff bounds the wait between failed dead-letter writes.
const maxDeadLetterBackoff = 30 * time.Second

// checkDeadLetterTopic refuses a stream whose dead-letter topic does not
// exist: a dead letter would otherwise fail at the first poison message,
// long after the stream opened.
func (g *Gateway) checkDeadLetterTopic(ctx context.Context, s streamSettings) error {
	if s.maxDeliveries == 0 {
		return nil
	}
	err := g.checkTopic(ctx, s.deadLetterTopic)
	if status.Code(err) == codes.NotFound {
		return streamError(codes.FailedPrecondition, "dead-letter topic %q does not exist: create it, or name another with metadata %q", s.deadLetterTopic, databusv1.MDDeadLetterTopic)
	}
	return err
}

// startDeadLetterLocked writes rt's dead letter from rec, off the lock.
// m.mu is held.
func (m *member) startDeadLetterLocked(rt *retry, rec *kgo.Record) {
	if rt.producing {
		return
	}
	rt.rec, rt.producing = rec, true
	group := m.key.group
	go func() {
		err := m.writeDeadLetter(deadLetter(rt, rec, group))
		m.deadLettered(rt, err)
	}()
}

// deadLetter is the record written for rt: rec's key, value, timestamp
// and headers, with the dead-letter headers added.
func deadLetter(rt *retry, rec *kgo.Record, group string) *kgo.Record {
	h := slices.Grow(slices.Clone(rec.Headers), 6)
	h = append(h,
		kgo.RecordHeader{Key: databusv1.HeaderOriginalTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: databusv1.HeaderOriginalPartition, Value: strconv.AppendInt(nil, int64(rec.Partition), 10)},
		kgo.RecordHeader{Key: databusv1.HeaderOriginalOffset, Value: strconv.AppendInt(nil, rec.Offset, 10)},
		kgo.RecordHeader{Key: databusv1.HeaderDeliveryCount, Value: strconv.AppendUint(nil, uint64(rt.count), 10)},
		kgo.RecordHeader{Key: databusv1.HeaderNackReason, Value: []byte(rt.reason)},
		kgo.RecordHeader{Key: databusv1.HeaderConsumerGroup, Value: []byte(group)},
	)
	return &kgo.Record{Topic: rt.topic, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: h}
}

// writeDeadLetter produces dl within --produce-timeout.
func (m *member) writeDeadLetter(dl *kgo.Record) error {
	cl, err := m.g.sharedClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.g.cfg.ProduceTimeout)
	defer cancel()
	return cl.ProduceSync(ctx, dl).FirstErr()
}

// deadLettered settles rt's write: stored, its offset is acked (if its
// partition's window still holds it waiting: else it will be delivered,
// and dead-lettered, again); failed, it is tried again after a backoff.
func (m *member) deadLettered(rt *retry, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rt.producing = false
	if rt.dropped {
		return
	}
	if err != nil {
		m.g.m.deadLetters.WithLabelValues("error").Inc()
		if m.ctx.Err() != nil {
			return // the member closes: its retries go with it
		}
		rt.attempts++
		backoff := min(maxDeadLetterBackoff, m.g.cfg.MaxNackDelay, time.Second<<min(rt.attempts-1, 5))
		m.g.log.Warn("databus: dead letter not stored; trying again", "group", m.key.group, "topic", rt.topic,
			"partition", rt.p.id, "offset", rt.offset, "retry_in", backoff, "err", err)
		rt.fired, rt.due = false, time.Now().Add(backoff)
		m.pushRetryLocked(rt)
		return
	}
	m.g.m.deadLetters.WithLabelValues("ok").Inc()
	p := rt.p
	m.dropRetryLocked(rt)
	if m.parts[p.id] != p {
		return
	}
	m.ackWaitingLocked(p, rt.offset)
}

// ackWaitingLocked acks p's waiting offset (its message was dead-lettered,
// or is gone from Kafka), and lets its stream take more. m.mu is held.
func (m *member) ackWaitingLocked(p *partState, offset int64) {
	ok, released := p.t.ackWaiting(offset)
	if !ok || released == 0 {
		return
	}
	p.pruneCounts()
	m.g.m.held.Sub(float64(released))
	if st := p.owner; st != nil {
		st.releasedLocked(released)
	}
}
