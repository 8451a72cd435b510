package gateway

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Subscribe serves one subscribe stream: a share of its group's partitions
// on this gateway (see member), whose messages are pushed in batches and
// whose offsets are committed only up to what the client acked.
func (g *Gateway) Subscribe(stream databusv1.DataBus_SubscribeServer) error {
	g.streams.Add(1)
	defer g.streams.Done()
	if g.cfg.Echo {
		return g.ended(streamError(codes.FailedPrecondition, "this gateway runs in echo mode, without Kafka: subscribe through a gateway started with --brokers"))
	}
	if err := g.openStream(); err != nil {
		return g.ended(err)
	}
	defer g.closeStream()
	ctx := stream.Context()
	// A replay reads outside any group and commits nothing (replay.go).
	if isReplay(ctx) {
		return g.ended(g.replay(ctx, stream))
	}
	s, err := g.settingsFrom(ctx, true)
	if err != nil {
		return g.ended(err)
	}
	if err := g.checkTopic(ctx, s.topic); err != nil {
		return g.ended(err)
	}
	if err := g.checkDeadLetterTopic(ctx, s); err != nil {
		return g.ended(err)
	}
	g.m.streams.WithLabelValues("subscribe").Inc()
	defer g.m.streams.WithLabelValues("subscribe").Dec()

	st := &subStream{
		g: g, s: s, stream: stream,
		failed: make(chan error, 1), acked: make(chan struct{}, 1),
		parts: map[int32]*partState{},
	}
	if err := g.attach(st); err != nil {
		return g.ended(err)
	}
	return g.ended(st.run(ctx))
}

// subStream is one subscribe stream. Its handler's goroutine waits for
// the stream's end; a second one receives acks; a third, started only
// while there is something to send (kickLocked), sends. Sends happen off
// the handler so that a send the client does not read can be given up on:
// only the handler's return ends a gRPC stream, and with it the send.
// The state below "guarded" belongs to its member, under the member's
// mutex.
type subStream struct {
	g      *Gateway
	m      *member
	s      streamSettings
	stream databusv1.DataBus_SubscribeServer

	failed chan error    // the sender ends the stream (a send failed or timed out)
	acked  chan struct{} // an ack came (a draining stream waits for them)

	// Guarded by m.mu.
	parts map[int32]*partState // the partitions it has now
	// queue holds records fetched for its partitions and not yet sent,
	// in offset order per partition; queueBytes their bytes.
	queue      []*kgo.Record
	queueBytes int64
	// redeliver holds due retries' records fetched again for it
	// (retryreader.go), sent before the queue; redeliverBytes their bytes.
	redeliver      []redelivery
	redeliverBytes int64
	held           int  // offsets in its partitions' windows: what the cap bounds
	unacked        int  // of those, not acked
	sending        bool // a sender goroutine runs
	paused         bool // its partitions are paused in the member's client
	draining       bool
	ended          bool
	// Notices for the client's next response.
	assignedP, revokedP []int32
}

func (st *subStream) run(ctx context.Context) error {
	defer st.g.detach(st)
	recvErr := make(chan error, 1)
	go func() { recvErr <- st.receiveAcks() }()
	select {
	case err := <-st.failed:
		if _, ok := status.FromError(err); ok {
			return err
		}
		return nil // the client went away
	case err := <-recvErr:
		if err == errStreamFailed {
			return <-st.failed
		}
		return nil // the client closed or went away
	case <-st.g.draining:
		return st.drain(recvErr, streamError(codes.Unavailable, "%v", ErrDraining))
	case <-connGoingAway(ctx):
		return st.drain(recvErr, databusv1.StreamMoved(movedMessage))
	case <-ctx.Done():
		return nil
	}
}

// room is how many more offsets the stream may hold. m.mu is held.
func (st *subStream) room() int { return st.s.maxUnacked - st.held }

// wantPause says whether the stream's partitions should not be fetched:
// it takes nothing more (ended, draining), or what it holds and has
// queued reaches its cap, or its queued bytes --max-stream-bytes. m.mu is
// held.
func (st *subStream) wantPause() bool {
	return st.ended || st.draining || st.held+len(st.queue) >= st.s.maxUnacked || st.queueBytes >= st.g.cfg.MaxStreamBytes
}

// kickLocked starts the stream's sender if it has something to send.
// m.mu is held.
func (st *subStream) kickLocked() {
	if st.sending || st.ended {
		return
	}
	// Redeliveries take no room: their offsets are held already.
	canSend := !st.draining && (len(st.queue) > 0 && st.room() > 0 || len(st.redeliver) > 0)
	if !canSend && len(st.assignedP)+len(st.revokedP) == 0 {
		return
	}
	st.sending = true
	go st.sendLoop()
}

// sendLoop sends until the stream has nothing more to send now.
func (st *subStream) sendLoop() {
	for {
		resp, bytes := st.next()
		if resp == nil {
			return
		}
		if err := st.send(resp, bytes); err != nil {
			// The stream ends; sending stays set so no sender starts again.
			st.fail(err)
			return
		}
	}
}

// next takes the stream's next response from its queue: at most a batch,
// and no more than its room under the cap, with any notices. The records
// taken are delivered: they enter their partitions' windows. It returns
// nil, and marks the sender gone, when there is nothing to send.
func (st *subStream) next() (*databusv1.SubscribeResponse, int64) {
	m := st.m
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	if !st.ended && !st.draining {
		n = min(st.s.batchSize, st.room(), len(st.queue))
	}
	redeliver := len(st.redeliver) > 0 && !st.draining
	if st.ended || n == 0 && !redeliver && len(st.assignedP)+len(st.revokedP) == 0 {
		st.sending = false
		return nil, 0
	}
	if (m.retrying > 0 || redeliver) && !st.ended && !st.draining {
		return st.nextWithRetries()
	}
	resp := &databusv1.SubscribeResponse{Assigned: st.assignedP, Revoked: st.revokedP}
	st.assignedP, st.revokedP = nil, nil
	bytes := int64(0)
	if n > 0 {
		resp.Messages = consumedMessages(st.queue[:n])
		now := int64(0) // delivery times serve databus_oldest_unacked_age_seconds alone
		if m.g.m.on {
			now = time.Now().UnixNano()
		}
		for i, r := range st.queue[:n] {
			p := st.parts[r.Partition]
			resp.Messages[i].DeliveryCount = p.deliveryCount(r.Offset)
			t := p.t
			t.deliver(r.Offset, r.LeaderEpoch)
			if now != 0 {
				t.stamp(now)
			}
			bytes += recordBytes(r)
			st.queue[i] = nil // the array outlives the slice: let the record go
		}
		st.queue = st.queue[n:]
		if len(st.queue) == 0 {
			st.queue = nil
		}
		st.queueBytes -= bytes
		st.held += n
		st.unacked += n
		if hook := testHookDelivered.Load(); hook != nil {
			(*hook)(st.held, st.maxTrackerHeld(), st.s.maxUnacked)
		}
		if st.paused && !st.wantPause() {
			m.wakeLocked() // fewer bytes queued: its partitions may resume
		}
		m.g.m.held.Add(float64(n))
		m.g.m.unacked.Add(float64(n))
		m.g.m.messagesOut.Add(float64(n))
		m.g.m.bytesOut.Add(float64(bytes))
	}
	return resp, bytes
}

// consumedMessages converts records to a response's messages. The
// messages, their headers and the headers' pointers are three
// allocations for the whole response, not three per message: they were
// the most allocated objects of a drain, and the garbage collector's
// work grows with their count. They live and die together, with the
// response, once gRPC has marshaled it. Keys, values and header values
// are the records' own bytes, not copies.
func consumedMessages(recs []*kgo.Record) []*databusv1.ConsumedMessage {
	headers := 0
	for _, r := range recs {
		headers += len(r.Headers)
	}
	msgs := make([]databusv1.ConsumedMessage, len(recs))
	hs := make([]databusv1.Header, headers)
	hps := make([]*databusv1.Header, headers)
	out := make([]*databusv1.ConsumedMessage, len(recs))
	for i, r := range recs {
		cm := &msgs[i]
		cm.Topic, cm.Partition, cm.Offset = r.Topic, r.Partition, r.Offset
		cm.TimestampMs, cm.Key, cm.Value = r.Timestamp.UnixMilli(), r.Key, r.Value
		if len(r.Headers) > 0 {
			cm.Headers = hps[:len(r.Headers):len(r.Headers)]
			for j, h := range r.Headers {
				hs[j].Key, hs[j].Value = h.Key, h.Value
				cm.Headers[j] = &hs[j]
			}
			hs, hps = hs[len(r.Headers):], hps[len(r.Headers):]
		}
		out[i] = cm
	}
	return out
}

// send sends one response within --send-timeout. Its messages' bytes
// stay counted in the gateway's bytes in flight until gRPC took them.
// A client that does not read holds the send (HTTP/2 flow control) past
// the timeout: the stream then ends with DeadlineExceeded, which ends the
// send too, and its partitions go to other streams, its unacked messages
// with them.
func (st *subStream) send(resp *databusv1.SubscribeResponse, bytes int64) error {
	timeout := st.g.cfg.SendTimeout
	timer := time.AfterFunc(timeout, func() {
		st.g.m.sendTimeouts.Inc()
		st.fail(streamError(codes.DeadlineExceeded, "the client read nothing for %v (--send-timeout): this stream ended and its partitions and unacked messages went to the group's other subscribers; keep reading while you process (ack from another goroutine), or raise the limit", timeout))
	})
	start := time.Now()
	err := st.stream.Send(resp)
	timer.Stop()
	if st.g.m.on {
		st.g.m.subscribeWait.Observe(time.Since(start).Seconds())
	}
	st.g.releaseSubscribeBytes(bytes)
	return err
}

// fail ends the stream with err (the first reason wins).
func (st *subStream) fail(err error) {
	select {
	case st.failed <- err:
	default:
	}
}

// dropQueueLocked drops the queued records of partition id (all of them
// when id < 0), its queued redeliveries too, and returns the offset of
// the first of id's queued records. m.mu is held.
func (st *subStream) dropQueueLocked(id int32) (first int64, ok bool) {
	st.dropRedeliveriesLocked(id)
	if len(st.queue) == 0 {
		return 0, false
	}
	keep := st.queue[:0]
	bytes := int64(0)
	for _, r := range st.queue {
		if id >= 0 && r.Partition != id {
			keep = append(keep, r)
			continue
		}
		if !ok && r.Partition == id {
			first, ok = r.Offset, true
		}
		bytes += recordBytes(r)
	}
	clear(st.queue[len(keep):])
	st.queue = keep
	if len(keep) == 0 {
		st.queue = nil
	}
	st.queueBytes -= bytes
	st.g.releaseSubscribeBytes(bytes)
	return first, ok
}

// holdSubscribeBytes counts n bytes of fetched records, queued for a
// subscriber, in the gateway's bytes in flight (--max-gateway-bytes) and
// its metric; releaseSubscribeBytes counts them off once they were sent
// or dropped.
func (g *Gateway) holdSubscribeBytes(n int64) {
	g.bytes.add(n)
	g.m.subscribeBytes.Add(float64(n))
}

func (g *Gateway) releaseSubscribeBytes(n int64) {
	g.bytes.release(n)
	g.m.subscribeBytes.Sub(float64(n))
}

// recordBytes is what a record counts against bytes limits.
func recordBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// receiveAcks applies the client's acks until the stream ends.
func (st *subStream) receiveAcks() error {
	for {
		req, err := st.stream.Recv()
		if err != nil {
			return err
		}
		freed, ignored := st.m.ack(st, req.Acks)
		st.g.m.acksIgnored.Add(float64(ignored))
		if len(req.Nacks) > 0 {
			if err := st.m.nack(st, req.Nacks); err != nil {
				st.fail(err)
				return errStreamFailed
			}
		}
		if freed > 0 {
			select {
			case st.acked <- struct{}{}:
			default:
			}
		}
	}
}

// drain stops deliveries to the stream, gives the client a moment to ack
// what it holds, then ends the stream with end; detach commits the acks.
func (st *subStream) drain(recvErr <-chan error, end error) error {
	m := st.m
	m.mu.Lock()
	st.draining = true
	m.wakeLocked() // pause its partitions
	m.mu.Unlock()
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		left := st.unacked
		m.mu.Unlock()
		if left == 0 {
			break
		}
		select {
		case <-st.acked:
		case <-recvErr:
			return end
		case <-deadline.C:
			return end
		}
	}
	return end
}

// errStreamFailed is receiveAcks' end when it ended the stream with a
// status (st.failed has it).
var errStreamFailed = errors.New("gateway: the stream failed")

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// testHookDelivered, when set (tests), sees every delivery: the stream's
// held offsets, its largest tracker's, and its cap.
var testHookDelivered atomic.Pointer[func(held, trackerHeld, limit int)]

func (st *subStream) maxTrackerHeld() int {
	n := 0
	for _, p := range st.parts {
		n = max(n, p.t.held())
	}
	return n
}
