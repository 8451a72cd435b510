package databus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// ReplayFrom is where a replay starts: FromTime or FromOffsets, and
// whether it ends (UntilNow).
type ReplayFrom struct {
	time    time.Time
	offsets map[int32]int64
	endNow  bool
}

// FromTime replays every partition of the topic from its first message
// stamped at or after t (t may not be in the future).
func FromTime(t time.Time) ReplayFrom { return ReplayFrom{time: t} }

// FromOffsets replays the partitions listed, each from its offset; the
// others are not read. An offset below a partition's first (retention
// deleted what was before) starts at its first; one past its end waits
// there for new messages.
func FromOffsets(offsets map[int32]int64) ReplayFrom {
	return ReplayFrom{offsets: maps.Clone(offsets)}
}

// UntilNow ends the replay, with io.EOF from Recv and nil from Replay,
// once it delivered every message the partitions held when it opened
// (a backfill). Without it a replay tails the topic until it is closed.
func (f ReplayFrom) UntilNow() ReplayFrom {
	f.endNow = true
	return f
}

// metadata is f as stream metadata.
func (f ReplayFrom) metadata() ([]string, error) {
	var md []string
	switch {
	case f.offsets != nil:
		if len(f.offsets) == 0 {
			return nil, errors.New("databus: FromOffsets needs at least one partition")
		}
		parts := make([]string, 0, len(f.offsets))
		for _, p := range slices.Sorted(maps.Keys(f.offsets)) {
			parts = append(parts, fmt.Sprintf("%d:%d", p, f.offsets[p]))
		}
		md = append(md, databusv1.MDStartOffsets, strings.Join(parts, ","))
	case !f.time.IsZero():
		md = append(md, databusv1.MDStartTime, strconv.FormatInt(f.time.UnixMilli(), 10))
	default:
		return nil, errors.New("databus: a replay starts FromTime(t) or FromOffsets(offsets)")
	}
	if f.endNow {
		md = append(md, databusv1.MDReplayEnd, "now")
	}
	return md, nil
}

// OpenReplay opens one replay stream of topic: it reads from where from
// says, joins no consumer group and commits nothing, so the topic's
// groups are not moved. Recv its batches (their DeliveryCount is 0);
// acks are not needed. Close ends it at once (there is nothing to
// commit), and so does the end of an UntilNow replay (Recv returns
// io.EOF). MaxUnacked
// does not apply: a replay is bounded by how fast the client reads.
func (c *Client) OpenReplay(ctx context.Context, topic string, from ReplayFrom, opts ...SubscribeOption) (*Subscription, error) {
	var sc subCfg
	for _, o := range opts {
		o(&sc)
	}
	if topic == "" {
		return nil, errors.New("databus: a replay needs a topic")
	}
	replay, err := from.metadata()
	if err != nil {
		return nil, err
	}
	md := append([]string{databusv1.MDTopic, topic}, replay...)
	if sc.batchSize > 0 {
		md = append(md, databusv1.MDBatchSize, strconv.Itoa(sc.batchSize))
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.api.Subscribe(streamContext(ctx, md...))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("databus: open replay stream: %w", err)
	}
	return &Subscription{stream: stream, cancel: cancel, replay: true}, nil
}

// Replay reads topic from where from says, calling handle for each
// batch, until ctx ends (then it returns nil), an UntilNow replay reached
// its end (nil), or an error retrying cannot fix. A stream that breaks
// (the gateway restarted, drained, crashed) is reopened, after a backoff
// (at once when the gateway moved it), from the message after the last
// one handle returned nil for, per partition: handle sees each message
// once, across any number of reconnects. A batch handle fails is given
// again, after a backoff. A replay FromTime reopens from the same time
// and skips what handle had; an UntilNow replay reopened ends at the end
// the topic has when it reopens.
func (c *Client) Replay(ctx context.Context, topic string, from ReplayFrom, handle func(context.Context, []Delivery) error, opts ...SubscribeOption) error {
	var sc subCfg
	for _, o := range opts {
		o(&sc)
	}
	next := map[int32]int64{} // per partition, the offset after the last handled
	return c.reconnect(ctx, sc, func(attempt *int) (bool, error) {
		return c.replayOnce(ctx, topic, from.resumed(next), handle, next, opts, attempt)
	})
}

// resumed is where a replay that handled up to next starts again: the
// offsets listed move past what was handled; a time stays (what was
// handled is skipped as it comes).
func (f ReplayFrom) resumed(next map[int32]int64) ReplayFrom {
	if f.offsets == nil || len(next) == 0 {
		return f
	}
	r := f
	r.offsets = maps.Clone(f.offsets)
	for p, o := range next {
		if _, ok := r.offsets[p]; ok {
			r.offsets[p] = max(r.offsets[p], o)
		}
	}
	return r
}

// replayOnce runs one replay stream; ended when the gateway ended it
// with OK: an UntilNow replay reached its end.
func (c *Client) replayOnce(ctx context.Context, topic string, from ReplayFrom, handle func(context.Context, []Delivery) error, next map[int32]int64, opts []SubscribeOption, attempt *int) (ended bool, err error) {
	sub, err := c.OpenReplay(ctx, topic, from, opts...)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	for {
		b, err := sub.Recv()
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		*attempt = 0 // the stream works: reset the backoff
		fresh := b.Messages[:0:0]
		for _, d := range b.Messages {
			if o, seen := next[d.Partition]; !seen || d.Offset >= o {
				fresh = append(fresh, d)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		if err := handle(ctx, fresh); err != nil {
			return false, fmt.Errorf("%w: %w", errHandler, err)
		}
		for _, d := range fresh {
			next[d.Partition] = max(next[d.Partition], d.Offset+1)
		}
	}
}

// reconnect (Subscribe's and Replay's) runs once, a stream's life,
// again and again until ctx ends (nil), once says it is done (nil), or it
// fails with an error retrying cannot fix, or any error when sc turns
// reconnecting off. A stream the
// gateway moved is reopened at once, the first time; others after the
// Client's backoff. once resets *attempt when its stream worked.
func (c *Client) reconnect(ctx context.Context, sc subCfg, once func(attempt *int) (done bool, err error)) error {
	for attempt := 0; ; {
		done, err := once(&attempt)
		if ctx.Err() != nil || done {
			return nil
		}
		if sc.noReconnect || !resumable(err) {
			return err
		}
		if Moved(err) && attempt == 0 {
			// A stream that worked ended in good order to move:
			// reconnect at once (one moved again before it delivered
			// anything waits as after any error).
			attempt++
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.backoff(attempt)):
		}
		attempt++
	}
}
