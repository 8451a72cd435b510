package databus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Delivery is a consumed message.
type Delivery struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Batch is what one Recv returns: messages, and the partitions this member
// just gained or lost (acks for lost partitions are ignored by the gateway;
// their unacked messages go to the partitions' new owners).
type Batch struct {
	Messages []Delivery
	Assigned []int32
	Revoked  []int32
}

// SubscribeOption configures a subscription.
type SubscribeOption func(*subCfg)

type subCfg struct {
	maxUnacked, batchSize int
	noReconnect           bool
}

// MaxUnacked caps messages delivered and not yet acked (default 1000): the
// gateway stops delivering until acks come back.
func MaxUnacked(n int) SubscribeOption { return func(c *subCfg) { c.maxUnacked = n } }

// BatchSize caps messages per batch (default 100).
func BatchSize(n int) SubscribeOption { return func(c *subCfg) { c.batchSize = n } }

// Reconnect says whether Subscribe opens a new stream, after a backoff
// (the Client's, see WithBackoff), when its stream breaks: the gateway
// restarted, drained or crashed, the connection dropped (default on); a
// stream the gateway moved (its connection reached the gateway's
// --max-connection-age) is reopened at once, without backoff. Off,
// Subscribe returns the error that ended its stream, or the handler's
// (wrapped). OpenSubscription is one stream and ignores it.
func Reconnect(on bool) SubscribeOption { return func(c *subCfg) { c.noReconnect = !on } }

// Subscription is one subscribe stream with manual acks. Recv and Ack may
// be called from different goroutines; each of them from one at a time.
type Subscription struct {
	stream databusv1.DataBus_SubscribeClient
	cancel context.CancelFunc
	sendMu sync.Mutex
}

// OpenSubscription joins group on topic as one member. Messages not acked
// before the subscription ends are delivered again, to this group's
// members, after the gateway commits what was acked.
func (c *Client) OpenSubscription(ctx context.Context, topic, group string, opts ...SubscribeOption) (*Subscription, error) {
	var sc subCfg
	for _, o := range opts {
		o(&sc)
	}
	if topic == "" || group == "" {
		return nil, errors.New("databus: a subscription needs a topic and a group")
	}
	md := []string{databusv1.MDTopic, topic, databusv1.MDGroup, group}
	if sc.maxUnacked > 0 {
		md = append(md, databusv1.MDMaxUnacked, strconv.Itoa(sc.maxUnacked))
	}
	if sc.batchSize > 0 {
		md = append(md, databusv1.MDBatchSize, strconv.Itoa(sc.batchSize))
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.api.Subscribe(streamContext(ctx, md...))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("databus: open subscribe stream: %w", err)
	}
	return &Subscription{stream: stream, cancel: cancel}, nil
}

// Recv waits for the next batch.
func (s *Subscription) Recv() (*Batch, error) {
	resp, err := s.stream.Recv()
	if err != nil {
		return nil, err
	}
	b := &Batch{Assigned: resp.Assigned, Revoked: resp.Revoked, Messages: make([]Delivery, len(resp.Messages))}
	for i, m := range resp.Messages {
		d := Delivery{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Timestamp: time.UnixMilli(m.TimestampMs), Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			d.Headers = append(d.Headers, Header{Key: h.Key, Value: h.Value})
		}
		b.Messages[i] = d
	}
	return b, nil
}

// Ack tells the gateway these messages are processed. Acks may come in
// any order; the gateway commits only past messages that were all acked.
func (s *Subscription) Ack(ds ...Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	req := &databusv1.SubscribeRequest{Acks: make([]*databusv1.Ack, len(ds))}
	for i, d := range ds {
		req.Acks[i] = &databusv1.Ack{Partition: d.Partition, Offset: d.Offset}
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(req)
}

// Close ends the subscription: the gateway commits what was acked and
// leaves the group.
func (s *Subscription) Close() error {
	s.sendMu.Lock()
	err := s.stream.CloseSend()
	s.sendMu.Unlock()
	s.cancel()
	return err
}

// Subscribe consumes topic as a member of group until ctx ends, calling
// handle for each batch. When handle returns nil the batch is acked; when
// it returns an error the subscription is reopened after a backoff, so the
// batch is delivered again (maybe to another member). A broken stream is
// reopened with backoff, as a new member of the group (see Reconnect);
// Subscribe returns nil when ctx ends, or an error retrying cannot fix:
// the topic does not exist (NotFound), a setting is wrong
// (InvalidArgument), the gateway cannot serve subscriptions
// (FailedPrecondition), access is denied. Delivery is at least once: what
// was not acked, or acked but not yet committed by the gateway when the
// stream broke, is delivered again, so handle must tolerate duplicates.
func (c *Client) Subscribe(ctx context.Context, topic, group string, handle func(context.Context, []Delivery) error, opts ...SubscribeOption) error {
	var sc subCfg
	for _, o := range opts {
		o(&sc)
	}
	for attempt := 0; ; {
		err := c.subscribeOnce(ctx, topic, group, handle, opts, &attempt)
		if ctx.Err() != nil {
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

var errHandler = errors.New("databus: handler failed")

// errEnded is returned when the gateway ended a subscribe stream without
// an error.
var errEnded = fmt.Errorf("databus: the gateway ended the subscription: %w", io.EOF)

// resumable reports whether Subscribe should reopen a stream that ended
// with err: every error but those saying the subscription itself is wrong.
// A stream that broke under the handler fails its ack with io.EOF, and
// one ended by a proxy may carry Unknown or Internal: both are resumed.
func resumable(err error) bool {
	if errors.Is(err, errHandler) || errors.Is(err, io.EOF) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated:
		return false
	}
	return true
}

func (c *Client) subscribeOnce(ctx context.Context, topic, group string, handle func(context.Context, []Delivery) error, opts []SubscribeOption, attempt *int) error {
	sub, err := c.OpenSubscription(ctx, topic, group, opts...)
	if err != nil {
		return err
	}
	defer sub.Close()
	for {
		b, err := sub.Recv()
		if errors.Is(err, io.EOF) {
			return errEnded
		}
		if err != nil {
			return err
		}
		*attempt = 0 // the stream works: reset the backoff
		if len(b.Messages) == 0 {
			continue
		}
		if err := handle(ctx, b.Messages); err != nil {
			return fmt.Errorf("%w: %w", errHandler, err)
		}
		if err := sub.Ack(b.Messages...); err != nil {
			// io.EOF: the stream broke while the handler ran. The batch
			// was not acked: it is delivered again.
			return fmt.Errorf("databus: ack: %w", err)
		}
	}
}
