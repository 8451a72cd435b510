package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Replays. A subscribe stream whose metadata has x-databus-start-time or
// x-databus-start-offsets reads the topic from there with a Kafka client
// of its own that joins no group and commits nothing, so it moves no
// group's offsets and causes no rebalance: "what came in since 10:00",
// for debugging or a backfill, beside the group's live consumers.
//
// Where each partition starts is resolved once, when the stream opens
// (ListOffsetsAfterMilli for a time, the offsets given clamped to the
// partition's log for offsets), and read from there with
// ConsumePartitions. The stream reads no further ahead than it sends:
// it polls at most a batch, sends it (gRPC blocks the send while the
// client does not read, bounded by --send-timeout), then polls again, so
// what it holds is that batch and the one fetch franz-go buffers.
//
// With x-databus-replay-end: now, the end of each partition is its last
// stable offset when the stream opens (read committed, as the replay
// reads); the stream ends with OK once it read every partition to its
// end. Control records (transaction markers) are read too, so that a
// partition whose end is a marker is seen to reach it; they are never
// delivered.

// The label values of databus_streams and databus_kafka_clients for
// replays.
const (
	streamReplay = "replay"
	clientReplay = "replay" // a replay stream's own consumer, outside any group
)

// isReplay says whether a subscribe stream asks for a replay: any of the
// replay keys makes it one, so that a key given without the others is
// refused with what is missing rather than ignored.
func isReplay(ctx context.Context) bool {
	for _, key := range []string{databusv1.MDStartTime, databusv1.MDStartOffsets, databusv1.MDReplayEnd} {
		if len(metadata.ValueFromIncomingContext(ctx, key)) > 0 {
			return true
		}
	}
	return false
}

// replayStart is where a replay starts and whether it ends.
type replayStart struct {
	fromMilli int64           // start time, Unix ms; -1 when from offsets
	offsets   map[int32]int64 // start offsets of the partitions listed; nil when from a time
	endNow    bool
}

// replayStartFrom reads and validates a replay's metadata. Every error is
// an InvalidArgument status that names the key and says what to send.
func replayStartFrom(ctx context.Context, now time.Time) (replayStart, error) {
	get := func(key string) string {
		if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	r := replayStart{fromMilli: -1}
	if g := get(MDGroup); g != "" {
		return r, status.Errorf(codes.InvalidArgument, "databus: a replay (%s or %s) joins no group and does not move one: drop metadata %q, or drop the replay keys to consume as the group", databusv1.MDStartTime, databusv1.MDStartOffsets, MDGroup)
	}
	switch v := strings.ToLower(get(databusv1.MDReplayEnd)); v {
	case "":
	case "now":
		r.endNow = true
	default:
		return r, status.Errorf(codes.InvalidArgument, "databus: metadata %q is %q: give now (end at the topic's end when the stream opens), or leave it out to tail the topic", databusv1.MDReplayEnd, v)
	}
	t, offs := get(databusv1.MDStartTime), get(databusv1.MDStartOffsets)
	switch {
	case t != "" && offs != "":
		return r, status.Errorf(codes.InvalidArgument, "databus: metadata %q and %q are both set: a replay starts from a time or from offsets, give one", databusv1.MDStartTime, databusv1.MDStartOffsets)
	case t != "":
		ms, err := parseStartTime(t, now)
		if err != nil {
			return r, status.Errorf(codes.InvalidArgument, "databus: metadata %q is %q: %v", databusv1.MDStartTime, t, err)
		}
		r.fromMilli = ms
	case offs != "":
		m, err := parseStartOffsets(offs)
		if err != nil {
			return r, status.Errorf(codes.InvalidArgument, "databus: metadata %q is %q: %v", databusv1.MDStartOffsets, offs, err)
		}
		r.offsets = m
	default:
		return r, status.Errorf(codes.InvalidArgument, "databus: metadata %q is for a replay: give %q (a time) or %q (offsets) too", databusv1.MDReplayEnd, databusv1.MDStartTime, databusv1.MDStartOffsets)
	}
	return r, nil
}

// parseStartTime reads RFC 3339 or Unix milliseconds, from 1970 up to now.
func parseStartTime(v string, now time.Time) (int64, error) {
	const form = "give an RFC 3339 time (2026-11-27T10:00:00Z) or Unix milliseconds"
	var ms int64
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		ms = n
	} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		ms = t.UnixMilli()
	} else {
		return 0, errors.New(form)
	}
	switch {
	case ms < 0:
		return 0, fmt.Errorf("before 1970: %s", form)
	case ms > now.UnixMilli():
		return 0, fmt.Errorf("in the future (the gateway's clock reads %s): give a time up to now", now.UTC().Format(time.RFC3339))
	}
	return ms, nil
}

// maxStartOffsets bounds the partitions one x-databus-start-offsets may
// list: more than any topic needs, few enough to parse cheaply.
const maxStartOffsets = 10000

// parseStartOffsets reads "PARTITION:OFFSET,...".
func parseStartOffsets(v string) (map[int32]int64, error) {
	const form = `give "PARTITION:OFFSET,...", e.g. "0:1500,3:0"`
	items := strings.Split(v, ",")
	if len(items) > maxStartOffsets {
		return nil, fmt.Errorf("%d partitions listed, at most %d", len(items), maxStartOffsets)
	}
	out := make(map[int32]int64, len(items))
	for _, item := range items {
		ps, os, ok := strings.Cut(strings.TrimSpace(item), ":")
		p, perr := strconv.ParseInt(strings.TrimSpace(ps), 10, 32)
		o, oerr := strconv.ParseInt(strings.TrimSpace(os), 10, 64)
		switch {
		case !ok || perr != nil || oerr != nil:
			return nil, fmt.Errorf("%q: %s", item, form)
		case p < 0 || o < 0:
			return nil, fmt.Errorf("%q: partitions and offsets are 0 or more: %s", item, form)
		}
		if _, dup := out[int32(p)]; dup {
			return nil, fmt.Errorf("partition %d listed twice: give each once", p)
		}
		out[int32(p)] = o
	}
	return out, nil
}

// replayPlan is where each partition a replay reads starts, and with
// endNow where it ends.
type replayPlan struct {
	start map[int32]int64
	end   map[int32]int64 // endNow only
}

// plan resolves r against the topic's partitions: offsets for a time,
// offsets clamped into each partition's log, ends for endNow.
func (g *Gateway) plan(ctx context.Context, topic string, r replayStart) (replayPlan, error) {
	cl, err := g.sharedClient()
	if err != nil {
		return replayPlan{}, status.Error(codes.Unavailable, err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.KafkaTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	unreachable := func(what string, err error) error {
		return streamError(codes.Unavailable, "Kafka did not answer the %s of topic %q (%v): retry with backoff", what, topic, err)
	}
	// offsetsOf(what)(adm.List...(ctx, topic)) is a listing's offsets
	// by partition, or the error that ends the stream.
	offsetsOf := func(what string) func(kadm.ListedOffsets, error) (map[int32]int64, error) {
		return func(l kadm.ListedOffsets, err error) (map[int32]int64, error) {
			if err != nil {
				return nil, unreachable(what, err)
			}
			out := map[int32]int64{}
			for p, o := range l[topic] {
				if o.Err != nil {
					return nil, unreachable(what, o.Err)
				}
				out[p] = o.Offset
			}
			return out, nil
		}
	}
	logStart, err := offsetsOf("start offsets")(adm.ListStartOffsets(ctx, topic))
	if err != nil {
		return replayPlan{}, err
	}
	hwm, err := offsetsOf("end offsets")(adm.ListEndOffsets(ctx, topic))
	if err != nil {
		return replayPlan{}, err
	}
	p := replayPlan{start: map[int32]int64{}}
	if r.offsets != nil {
		for id, o := range r.offsets {
			if _, ok := logStart[id]; !ok {
				return replayPlan{}, status.Errorf(codes.InvalidArgument, "databus: metadata %q lists partition %d, which topic %q does not have (it has %d): list partitions 0 to %d", databusv1.MDStartOffsets, id, topic, len(logStart), len(logStart)-1)
			}
			// Below the log start the messages are gone (retention): start
			// at the first there is. Past the end: wait there.
			p.start[id] = min(max(o, logStart[id]), hwm[id])
		}
	} else {
		at, err := offsetsOf("offsets at the start time")(adm.ListOffsetsAfterMilli(ctx, r.fromMilli, topic))
		if err != nil {
			return replayPlan{}, err
		}
		for id := range logStart {
			o, ok := at[id]
			if !ok || o < 0 { // no message at or after the time
				o = hwm[id]
			}
			p.start[id] = max(o, logStart[id])
		}
	}
	if r.endNow {
		lso, err := offsetsOf("last stable offsets")(adm.ListCommittedOffsets(ctx, topic))
		if err != nil {
			return replayPlan{}, err
		}
		p.end = map[int32]int64{}
		for id := range p.start {
			p.end[id] = lso[id]
		}
	}
	return p, nil
}

// replayer is one replay stream: a handler that waits for its end, a
// receiver that reads (and ignores) what the client sends, and a pump
// that polls its own Kafka client and sends.
type replayer struct {
	g      *Gateway
	s      streamSettings
	stream databusv1.DataBus_SubscribeServer
	cl     *kgo.Client
	plan   replayPlan
	pos    map[int32]int64 // the next offset of each partition read
	failed chan error      // the pump ends the stream (a send failed or timed out)
	done   chan struct{}   // the pump sent everything up to the end (endNow)
}

// replay serves a replay stream (Subscribe's branch: isReplay).
func (g *Gateway) replay(ctx context.Context, stream databusv1.DataBus_SubscribeServer) error {
	s, err := g.settingsFrom(ctx, true)
	if err != nil {
		return err
	}
	r, err := replayStartFrom(ctx, time.Now())
	if err != nil {
		return err
	}
	// The Kafka client place first: a full gateway refuses before it
	// asks Kafka anything.
	if err := g.acquireClient(clientReplay); err != nil {
		return err
	}
	if err := g.checkTopic(ctx, s.topic); err != nil {
		g.releaseClient(clientReplay)
		return err
	}
	plan, err := g.plan(ctx, s.topic, r)
	if err != nil {
		g.releaseClient(clientReplay)
		return err
	}
	offsets := make(map[int32]kgo.Offset, len(plan.start))
	for id, o := range plan.start {
		offsets[id] = kgo.NewOffset().At(o)
	}
	// A partition whose log start passed its position meanwhile
	// (retention) goes on from the start.
	cl, err := newClient(g.kafkaOpts(append(outsideGroupOpts(g.cfg, kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: offsets}),
		kgo.KeepControlRecords(),
	)...))
	if err != nil {
		g.releaseClient(clientReplay)
		return streamError(codes.Unavailable, "%v", err)
	}
	g.m.streams.WithLabelValues(streamReplay).Inc()
	defer g.m.streams.WithLabelValues(streamReplay).Dec()
	rp := &replayer{
		g: g, s: s, stream: stream, cl: cl, plan: plan,
		pos:    plan.start,
		failed: make(chan error, 1), done: make(chan struct{}),
	}
	return rp.run(ctx)
}

// run waits for the replay's end. The pump may be blocked in a send when
// the stream ends: the handler does not wait for it (only its return ends
// the gRPC stream, and with it the send); the pump then closes the Kafka
// client, and the gateway's drain waits for it (g.streams).
func (rp *replayer) run(ctx context.Context) error {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	rp.g.streams.Add(1)
	go func() {
		defer rp.g.streams.Done()
		defer rp.g.releaseClient(clientReplay)
		defer rp.cl.Close()
		rp.pump(pctx)
	}()
	recvErr := make(chan error, 1)
	go func() { recvErr <- rp.receive() }()
	for {
		select {
		case err := <-rp.failed:
			if _, ok := status.FromError(err); ok {
				return err
			}
			return nil // the client went away
		case <-rp.done:
			return nil
		case err := <-recvErr:
			if status.Code(err) == codes.InvalidArgument { // a nack
				return err
			}
			if errors.Is(err, io.EOF) && rp.plan.end != nil {
				// A replay to an end runs to it though the client sent
				// all it had (grpcurl -d closes its side at once); it
				// stops early when the client cancels.
				recvErr = nil
				continue
			}
			return nil // the client closed (CloseSend) or went away
		case <-rp.g.draining:
			return streamError(codes.Unavailable, "%v; a replay resumes from the offsets after the last messages it received (the Go client's Replay does)", ErrDraining)
		case <-connGoingAway(ctx):
			return databusv1.StreamMoved(movedMessage)
		case <-ctx.Done():
			return nil
		}
	}
}

// receive reads what the client sends until it closes: acks are ignored
// (nothing is committed), nacks refused.
func (rp *replayer) receive() error {
	for {
		req, err := rp.stream.Recv()
		if err != nil {
			return err
		}
		if len(req.Nacks) > 0 {
			return status.Error(codes.InvalidArgument, "databus: a replay commits nothing: there is nothing to nack (acks are ignored too); to retry messages, consume as a group")
		}
	}
}

// pump polls at most a batch, sends it, and polls again, until ctx ends,
// a send fails, or (endNow) every partition reached its end.
func (rp *replayer) pump(ctx context.Context) {
	if rp.plan.end != nil {
		rp.pauseDone(nil)
		if rp.allDone() {
			close(rp.done)
			return
		}
	}
	for {
		if full := rp.g.bytes.wait(); full != nil {
			select {
			case <-full:
				continue
			case <-ctx.Done():
				return
			}
		}
		fetches := rp.cl.PollRecords(ctx, rp.s.batchSize)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return
		}
		// franz-go retries what can be retried (leader moves, brokers
		// away) and returns only what it cannot: end the stream, which
		// the client may reopen from what it received.
		var fetchErr error
		fetches.EachError(func(topic string, partition int32, err error) {
			if fetchErr == nil && !isContextErr(err) {
				fetchErr = streamError(codes.Unavailable, "Kafka failed the replay's fetch of topic %q partition %d (%v): reopen the replay from the offsets after the last messages you received", topic, partition, err)
			}
		})
		if fetchErr != nil {
			rp.fail(fetchErr)
			return
		}
		recs, finished := rp.take(fetches)
		if len(recs) > 0 {
			if err := rp.send(recs); err != nil {
				rp.fail(err)
				return
			}
		}
		if rp.plan.end != nil {
			rp.pauseDone(finished)
			if rp.allDone() {
				close(rp.done)
				return
			}
		}
	}
}

// take returns the records of fetches to deliver, moving each partition's
// position past what it read (control records too, which it does not
// deliver), and with endNow drops records at or past their partition's
// end; it returns the partitions that reached their end.
func (rp *replayer) take(fetches kgo.Fetches) (recs []*kgo.Record, finished []int32) {
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		for _, r := range fp.Records {
			end, bounded := rp.plan.end[r.Partition]
			if bounded && rp.pos[r.Partition] >= end {
				break
			}
			rp.pos[r.Partition] = r.Offset + 1
			if bounded && r.Offset >= end {
				break
			}
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
		}
		if end, ok := rp.plan.end[fp.Partition]; ok && rp.pos[fp.Partition] >= end {
			finished = append(finished, fp.Partition)
		}
	})
	return recs, finished
}

// pauseDone stops fetching the partitions that reached their end (all of
// them that have, when finished is nil).
func (rp *replayer) pauseDone(finished []int32) {
	if finished == nil {
		for id, end := range rp.plan.end {
			if rp.pos[id] >= end {
				finished = append(finished, id)
			}
		}
	}
	if len(finished) > 0 {
		rp.cl.PauseFetchPartitions(map[string][]int32{rp.s.topic: finished})
	}
}

func (rp *replayer) allDone() bool {
	for id, end := range rp.plan.end {
		if rp.pos[id] < end {
			return false
		}
	}
	return true
}

// send sends recs in one response within --send-timeout, their bytes
// counted in the gateway's bytes in flight until gRPC took them.
func (rp *replayer) send(recs []*kgo.Record) error {
	g := rp.g
	bytes := int64(0)
	for _, r := range recs {
		bytes += recordBytes(r)
	}
	g.holdSubscribeBytes(bytes)
	defer g.releaseSubscribeBytes(bytes)
	timeout := g.cfg.SendTimeout
	timer := time.AfterFunc(timeout, func() {
		g.m.sendTimeouts.Inc()
		rp.fail(streamError(codes.DeadlineExceeded, "the client read nothing for %v (--send-timeout): this replay ended; reopen it from the offsets after the last messages you received, and keep reading while you process", timeout))
	})
	defer timer.Stop()
	if err := rp.stream.Send(&databusv1.SubscribeResponse{Messages: consumedMessages(recs)}); err != nil {
		return err
	}
	g.m.replayMessages.Add(float64(len(recs)))
	g.m.bytesOut.Add(float64(bytes))
	return nil
}

// fail ends the stream with err (the first reason wins).
func (rp *replayer) fail(err error) {
	select {
	case rp.failed <- err:
	default:
	}
}
