package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/codes"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Subscribe serves one subscribe stream: a consumer-group member whose
// messages are pushed in batches and whose offsets are committed only up
// to what the client acked.
func (g *Gateway) Subscribe(stream databusv1.DataBus_SubscribeServer) error {
	g.streams.Add(1)
	defer g.streams.Done()
	if g.cfg.Echo {
		return g.ended(streamError(codes.FailedPrecondition, "this gateway runs in echo mode, without Kafka: subscribe through a gateway started with --brokers"))
	}
	ctx := stream.Context()
	s, err := g.settingsFrom(ctx, true)
	if err != nil {
		return g.ended(err)
	}
	if err := g.checkTopic(ctx, s.topic); err != nil {
		return g.ended(err)
	}
	g.m.streams.WithLabelValues("subscribe").Inc()
	defer g.m.streams.WithLabelValues("subscribe").Dec()

	sub := &subscription{g: g, s: s, stream: stream, trackers: map[int32]*partitionTracker{}, committed: map[int32]int64{}, room: make(chan struct{}, 1)}
	cl, err := newClient(g.kafkaOpts(
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		// Rebalances wait while a polled batch is being registered, so a
		// revocation never races the tracking of what was delivered.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(sub.assigned),
		kgo.OnPartitionsRevoked(sub.revoked),
		kgo.OnPartitionsLost(sub.lost),
		// A new group reads the topic from the start: a message published
		// before the first subscriber joined is not skipped.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(g.cfg.SessionTimeout),
		kgo.FetchMaxBytes(g.cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(g.cfg.FetchMaxBytes),
		kgo.MaxConcurrentFetches(1),
	))
	if err != nil {
		return g.ended(streamError(codes.Unavailable, "%v", err))
	}
	sub.cl = cl
	return g.ended(sub.run(ctx))
}

type subscription struct {
	g      *Gateway
	s      streamSettings
	stream databusv1.DataBus_SubscribeServer
	cl     *kgo.Client

	mu        sync.Mutex
	trackers  map[int32]*partitionTracker
	committed map[int32]int64 // last offset committed per partition
	// held counts the offsets in the trackers' windows (delivered and not
	// yet passed by a commit point): what the cap bounds. unacked counts
	// those of them not acked.
	held      int
	unacked   int
	assignedP []int32 // notices for the client's next response
	revokedP  []int32
	room      chan struct{} // signalled when acks free room or notices wait
}

func (s *subscription) run(ctx context.Context) error {
	defer func() {
		// Commit what was acked (never what was only delivered), then leave
		// the group so the partitions, and the unacked messages in them,
		// go to the other members at once.
		s.commit(s.g.ctx)
		s.cl.Close()
		s.mu.Lock()
		s.g.m.unacked.Sub(float64(s.unacked))
		s.g.m.held.Sub(float64(s.held))
		s.unacked, s.held = 0, 0
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	recvErr := make(chan error, 1)
	go func() { recvErr <- s.receiveAcks() }()
	go func() {
		t := time.NewTicker(s.g.cfg.CommitInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.commit(ctx)
			}
		}
	}()

	for {
		// Wait for room under the cap: the client's backpressure.
		for {
			s.mu.Lock()
			full := s.held >= s.s.maxUnacked
			notices := len(s.assignedP)+len(s.revokedP) > 0
			s.mu.Unlock()
			if notices {
				if s.send(nil) != nil {
					return nil // the client went away
				}
			}
			if !full {
				break
			}
			select {
			case <-s.room:
			case <-recvErr:
				return nil // the client closed or went away
			case <-s.g.draining:
				return s.drain()
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case <-recvErr:
			return nil // the client closed or went away
		case <-s.g.draining:
			return s.drain()
		default:
		}

		s.mu.Lock()
		n := min(s.s.batchSize, s.s.maxUnacked-s.held)
		s.mu.Unlock()
		// Poll briefly so notices and drains are not held up by a quiet topic.
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := s.cl.PollRecords(pctx, n)
		pcancel()
		if fetches.IsClientClosed() {
			return nil
		}
		var records []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) { records = append(records, r) })
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			s.g.log.Warn("databus: fetch error", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
		}
		msgs := s.track(records)
		s.cl.AllowRebalance()
		if len(msgs) > 0 {
			if s.send(msgs) != nil {
				return nil // the client went away
			}
		}
	}
}

// track registers delivered records and converts them for the client.
func (s *subscription) track(records []*kgo.Record) []*databusv1.ConsumedMessage {
	if len(records) == 0 {
		return nil
	}
	msgs := make([]*databusv1.ConsumedMessage, len(records))
	bytes := 0
	s.mu.Lock()
	for i, r := range records {
		t := s.trackers[r.Partition]
		if t == nil {
			t = newPartitionTracker()
			s.trackers[r.Partition] = t
		}
		t.deliver(r.Offset, r.LeaderEpoch)
		m := &databusv1.ConsumedMessage{
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			TimestampMs: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value,
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, &databusv1.Header{Key: h.Key, Value: h.Value})
		}
		msgs[i] = m
		bytes += len(r.Key) + len(r.Value)
	}
	s.unacked += len(records)
	s.held += len(records)
	if hook := testHookDelivered.Load(); hook != nil {
		(*hook)(s.held, s.maxTrackerHeld(), s.s.maxUnacked)
	}
	s.mu.Unlock()
	s.g.m.unacked.Add(float64(len(records)))
	s.g.m.held.Add(float64(len(records)))
	s.g.m.messagesOut.Add(float64(len(records)))
	s.g.m.bytesOut.Add(float64(bytes))
	return msgs
}

// testHookDelivered, when set (tests), sees every delivery: the stream's
// held offsets, its largest tracker's, and its cap.
var testHookDelivered atomic.Pointer[func(held, trackerHeld, limit int)]

func (s *subscription) maxTrackerHeld() int {
	m := 0
	for _, t := range s.trackers {
		m = max(m, t.held())
	}
	return m
}

// send pushes messages and any pending assignment notices.
func (s *subscription) send(msgs []*databusv1.ConsumedMessage) error {
	s.mu.Lock()
	resp := &databusv1.SubscribeResponse{Messages: msgs, Assigned: s.assignedP, Revoked: s.revokedP}
	s.assignedP, s.revokedP = nil, nil
	s.mu.Unlock()
	return s.stream.Send(resp)
}

// receiveAcks applies the client's acks until the stream ends.
func (s *subscription) receiveAcks() error {
	for {
		req, err := s.stream.Recv()
		if err != nil {
			return err
		}
		freed, released, ignored := 0, 0, 0
		s.mu.Lock()
		for _, a := range req.Acks {
			t := s.trackers[a.Partition]
			if t == nil {
				ignored++
				continue
			}
			if ok, rel := t.ack(a.Offset); ok {
				freed++
				released += rel
			} else {
				ignored++
			}
		}
		s.unacked -= freed
		s.held -= released
		s.mu.Unlock()
		s.g.m.unacked.Sub(float64(freed))
		s.g.m.held.Sub(float64(released))
		s.g.m.acksIgnored.Add(float64(ignored))
		if released > 0 {
			s.signal()
		}
	}
}

func (s *subscription) signal() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// drain gives the client a moment to ack what it holds, then ends the
// stream; run's deferred commit keeps the acks.
func (s *subscription) drain() error {
	deadline := time.After(2 * time.Second)
	for {
		s.mu.Lock()
		left := s.unacked
		s.mu.Unlock()
		if left == 0 {
			break
		}
		select {
		case <-s.room:
		case <-deadline:
			return streamError(codes.Unavailable, "%v", ErrDraining)
		}
	}
	return streamError(codes.Unavailable, "%v", ErrDraining)
}

// commitPoints returns, for the given partitions (all when nil), the
// commit points that moved since the last commit.
func (s *subscription) commitPoints(parts []int32) map[string]map[int32]kgo.EpochOffset {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int32]kgo.EpochOffset{}
	add := func(p int32, t *partitionTracker) {
		if t.commit >= 0 && t.commit > s.committed[p] {
			out[p] = kgo.EpochOffset{Epoch: t.epoch, Offset: t.commit}
		}
	}
	if parts == nil {
		for p, t := range s.trackers {
			add(p, t)
		}
	} else {
		for _, p := range parts {
			if t := s.trackers[p]; t != nil {
				add(p, t)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return map[string]map[int32]kgo.EpochOffset{s.s.topic: out}
}

// commit commits the acked watermark of parts (nil: every partition).
func (s *subscription) commitParts(ctx context.Context, parts []int32) {
	offsets := s.commitPoints(parts)
	if offsets == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.g.cfg.KafkaTimeout)
	defer cancel()
	var commitErr error
	s.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = firstCommitErr(resp)
		}
	})
	if commitErr != nil {
		s.g.m.commits.WithLabelValues("error").Inc()
		s.g.log.Warn("databus: commit failed; the messages will be redelivered", "group", s.s.group, "err", commitErr)
		return
	}
	s.g.m.commits.WithLabelValues("ok").Inc()
	s.mu.Lock()
	for p, eo := range offsets[s.s.topic] {
		s.committed[p] = eo.Offset
	}
	s.mu.Unlock()
}

func (s *subscription) commit(ctx context.Context) { s.commitParts(ctx, nil) }

func (s *subscription) assigned(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	s.mu.Lock()
	s.assignedP = append(s.assignedP, parts[s.s.topic]...)
	s.mu.Unlock()
	s.signal()
}

// revoked commits the acked watermark of the revoked partitions, then
// forgets them: later acks for them are ignored, and their unacked messages
// go to the new owner from the committed offset.
func (s *subscription) revoked(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
	ps := parts[s.s.topic]
	if len(ps) == 0 {
		return
	}
	s.commitParts(ctx, ps)
	s.forget(ps)
}

// lost forgets partitions without committing: the group moved on, and a
// commit would fail or, worse, land for the wrong generation.
func (s *subscription) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	s.forget(parts[s.s.topic])
}

func (s *subscription) forget(ps []int32) {
	s.mu.Lock()
	dropped, released := 0, 0
	for _, p := range ps {
		if t := s.trackers[p]; t != nil {
			dropped += t.unacked()
			released += t.held()
			delete(s.trackers, p)
		}
		delete(s.committed, p)
	}
	s.unacked -= dropped
	s.held -= released
	s.revokedP = append(s.revokedP, ps...)
	s.mu.Unlock()
	s.g.m.unacked.Sub(float64(dropped))
	s.g.m.held.Sub(float64(released))
	s.signal()
}

// firstCommitErr returns the first per-partition error of a commit response.
func firstCommitErr(resp *kmsg.OffsetCommitResponse) error {
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}
