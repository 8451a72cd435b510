package databus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
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
	// DeliveryCount is how many times the gateway delivered the message:
	// 1 the first time, one more at each redelivery (after a nack, or
	// after a stream that held it unacked ended). It is the gateway's
	// memory, not Kafka's: it starts again at 1 when the partition moves
	// to another gateway or the gateway restarts. 0 in a replay.
	DeliveryCount int
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

	// Retries and dead letters (nack.go), and Close's wait.
	maxDeliveries        int
	deadLetterTopic      string
	deadLetterTopicSet   bool
	retryFirst, retryMax time.Duration
	closeTimeout         time.Duration
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
// Subscribe returns the error that ended its stream (a handler's error
// ends no stream: its messages are nacked). OpenSubscription is one
// stream and ignores it.
func Reconnect(on bool) SubscribeOption { return func(c *subCfg) { c.noReconnect = !on } }

// Subscription is one subscribe stream with manual acks. Recv and Ack (or
// Nack) may be called from different goroutines; each of them from one at
// a time. Close may be called from any goroutine, Recv waiting or not.
type Subscription struct {
	stream       databusv1.DataBus_SubscribeClient
	cancel       context.CancelFunc
	closeTimeout time.Duration
	// replay: the stream is a replay (OpenReplay), which has no acks for
	// Close to wait for.
	replay bool

	sendMu sync.Mutex
	closed bool // guarded by sendMu: CloseSend was called

	recvMu sync.Mutex
	endErr error // guarded by recvMu: what the stream ended with
}

// OpenSubscription joins group on topic as one member. Messages not acked
// before the subscription ends are delivered again, to this group's
// members, after the gateway commits what was acked.
func (c *Client) OpenSubscription(ctx context.Context, topic, group string, opts ...SubscribeOption) (*Subscription, error) {
	sc, err := subscribeConfig(topic, group, opts)
	if err != nil {
		return nil, err
	}
	md := []string{databusv1.MDTopic, topic, databusv1.MDGroup, group}
	if sc.maxUnacked > 0 {
		md = append(md, databusv1.MDMaxUnacked, strconv.Itoa(sc.maxUnacked))
	}
	if sc.batchSize > 0 {
		md = append(md, databusv1.MDBatchSize, strconv.Itoa(sc.batchSize))
	}
	md = append(md, sc.deadLetterMetadata()...)
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.api.Subscribe(streamContext(ctx, md...))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("databus: open subscribe stream: %w", err)
	}
	return &Subscription{stream: stream, cancel: cancel, closeTimeout: sc.closeTimeout}, nil
}

// subscribeConfig applies opts and checks them with topic and group:
// Subscribe checks once, before its first stream, so that a wrong
// setting is an error at once rather than a reconnect loop.
func subscribeConfig(topic, group string, opts []SubscribeOption) (subCfg, error) {
	sc := subCfg{closeTimeout: defaultCloseTimeout, retryFirst: defaultRetryFirst, retryMax: defaultRetryMax}
	for _, o := range opts {
		o(&sc)
	}
	if topic == "" || group == "" {
		return sc, errors.New("databus: a subscription needs a topic and a group")
	}
	if sc.closeTimeout <= 0 {
		return sc, fmt.Errorf("databus: CloseTimeout(%s): give a positive duration", sc.closeTimeout)
	}
	return sc, sc.validateRetries()
}

// Recv waits for the next batch. After the stream ended it returns what
// it ended with: io.EOF when the gateway ended it in good order.
func (s *Subscription) Recv() (*Batch, error) {
	resp, err := s.recv()
	if err != nil {
		return nil, err
	}
	b := &Batch{Assigned: resp.Assigned, Revoked: resp.Revoked, Messages: make([]Delivery, len(resp.Messages))}
	for i, m := range resp.Messages {
		d := Delivery{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Timestamp: time.UnixMilli(m.TimestampMs), Key: m.Key, Value: m.Value, DeliveryCount: int(m.DeliveryCount)}
		for _, h := range m.Headers {
			d.Headers = append(d.Headers, Header{Key: h.Key, Value: h.Value})
		}
		b.Messages[i] = d
	}
	return b, nil
}

// recv is the stream's Recv, one caller at a time (Close drains it),
// remembering the end.
func (s *Subscription) recv() (*databusv1.SubscribeResponse, error) {
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	if s.endErr != nil {
		return nil, s.endErr
	}
	resp, err := s.stream.Recv()
	if err != nil {
		s.endErr = err
	}
	return resp, err
}

// Ack tells the gateway these messages are processed. Acks may come in
// any order; the gateway commits only past messages that were all acked.
func (s *Subscription) Ack(ds ...Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	return s.send(&databusv1.SubscribeRequest{Acks: acks(ds)})
}

func acks(ds []Delivery) []*databusv1.Ack {
	out := make([]*databusv1.Ack, len(ds))
	for i, d := range ds {
		out[i] = &databusv1.Ack{Partition: d.Partition, Offset: d.Offset}
	}
	return out
}

// send sends acks and nacks; ErrClosed after Close.
func (s *Subscription) send(req *databusv1.SubscribeRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.stream.Send(req)
}

// defaultCloseTimeout bounds Close's wait for the gateway by default.
const defaultCloseTimeout = 5 * time.Second

// CloseTimeout bounds how long Close waits for the gateway to end the
// stream, having read every ack sent before it (default 5s).
func CloseTimeout(d time.Duration) SubscribeOption {
	return func(c *subCfg) { c.closeTimeout = d }
}

// Close ends the subscription: it tells the gateway no more acks come,
// and waits until the gateway ended the stream, having applied every ack
// sent before Close (it then commits them, and leaves the group if this
// was the member's last stream), at most CloseTimeout and while the
// context given to OpenSubscription lasts. Messages that still arrive
// meanwhile are dropped: they were not acked and come again. Close
// returns nil when the gateway ended the stream in good order, else why
// it could not wait for that (acks it did not read are lost and their
// messages come again). It may be called while another goroutine waits
// in Recv, which then returns the stream's end; more calls return nil.
func (s *Subscription) Close() error {
	s.sendMu.Lock()
	if s.closed {
		s.sendMu.Unlock()
		return nil
	}
	s.closed = true
	err := s.stream.CloseSend()
	s.sendMu.Unlock()
	if s.replay {
		s.cancel() // nothing to commit: an UntilNow replay would otherwise run on to its end
		return nil
	}
	wait := s.closeTimeout
	var timedOut atomic.Bool
	timer := time.AfterFunc(wait, func() { timedOut.Store(true); s.cancel() })
	defer timer.Stop()
	defer s.cancel()
	if err != nil {
		return fmt.Errorf("databus: close: %w", err)
	}
	for {
		_, err = s.recv()
		if err != nil {
			break
		}
	}
	switch {
	case errors.Is(err, io.EOF) || Moved(err):
		return nil // the gateway read every ack and ended the stream
	case timedOut.Load():
		return fmt.Errorf("databus: close: the gateway did not end the stream within %s (CloseTimeout): acks it did not read are not committed, and their messages come again", wait)
	}
	return fmt.Errorf("databus: close: the stream ended with %w; acks the gateway did not read are not committed, and their messages come again", err)
}

// Subscribe consumes topic as a member of group until ctx ends, calling
// handle for each batch. When handle returns nil the batch is acked; when
// it returns an error every message of the batch is nacked, with the
// error's text as the reason and one delay that grows with the highest
// DeliveryCount among them (RetryDelay), and the stream goes on: the
// batch comes again after the delay (maybe to another member, maybe
// among other messages), while later messages keep coming. With DeadLetter, a message
// whose handler failed that many deliveries goes to the dead-letter topic
// instead. SubscribeEach handles and nacks message by message.
//
// A broken stream is reopened with backoff (see Reconnect); Subscribe
// returns nil when ctx ends, or an error retrying cannot fix: the topic
// does not exist (NotFound), a setting is wrong (InvalidArgument), the
// gateway cannot serve subscriptions (FailedPrecondition), access is
// denied. Delivery is at least once: what was not acked, or acked but not
// yet committed by the gateway when the stream broke, is delivered again,
// so handle must tolerate duplicates.
func (c *Client) Subscribe(ctx context.Context, topic, group string, handle func(context.Context, []Delivery) error, opts ...SubscribeOption) error {
	return c.consume(ctx, topic, group, opts, func(ctx context.Context, sub *Subscription, sc *subCfg, ds []Delivery) error {
		if err := handle(ctx, ds); err != nil {
			return sub.settle(nil, nackAll(ds, sc, err))
		}
		return sub.Ack(ds...)
	})
}

// settleFunc hands a batch to the caller's handler and acks or nacks its
// messages; it returns only the error of a send (the stream broke).
type settleFunc func(ctx context.Context, sub *Subscription, sc *subCfg, ds []Delivery) error

// consume runs subscriptions to topic, reopening them as Reconnect says,
// and settles each batch with settle.
func (c *Client) consume(ctx context.Context, topic, group string, opts []SubscribeOption, settle settleFunc) error {
	sc, err := subscribeConfig(topic, group, opts)
	if err != nil {
		return err
	}
	return c.reconnect(ctx, sc, func(attempt *int) (bool, error) {
		return false, c.subscribeOnce(ctx, topic, group, &sc, opts, settle, attempt)
	})
}

// errHandler wraps a replay handler's error: the replay reopens after a
// backoff, from after the last batch its handler took (a group's handler
// errors are nacks instead, and end nothing).
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

func (c *Client) subscribeOnce(ctx context.Context, topic, group string, sc *subCfg, opts []SubscribeOption, settle settleFunc, attempt *int) error {
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
		if err := settle(ctx, sub, sc, b.Messages); err != nil {
			// io.EOF: the stream broke while the handler ran. The batch
			// was not acked: it is delivered again.
			return fmt.Errorf("databus: ack: %w", err)
		}
	}
}
