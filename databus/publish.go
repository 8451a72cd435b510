package databus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// ErrClosed is returned for publishes on a closed Publisher.
var ErrClosed = errors.New("databus: publisher closed")

// PublisherOption configures a Publisher.
type PublisherOption func(*Publisher)

// Aggregation asks the gateway to share its producers between this stream
// and others: better batching and less load on Kafka, at the cost of a few
// milliseconds of latency. Default off.
func Aggregation(on bool) PublisherOption { return func(p *Publisher) { p.aggregation = on } }

// MaxInflight sets how many batches may wait for their answer at once
// (default 16). PublishAsync blocks when that many are in flight.
func MaxInflight(n int) PublisherOption { return func(p *Publisher) { p.maxInflight = n } }

// Publisher publishes batches on one stream to one topic. Batches are
// pipelined; each is answered only after Kafka stored every record. When
// the stream breaks for a reason worth retrying (the gateway restarted or
// drains, the network blipped), the Publisher reconnects with backoff and
// resends every batch not yet answered, so a batch is stored at least once
// (a resent batch may be stored twice). It is safe for concurrent use.
type Publisher struct {
	c           *Client
	topic       string
	aggregation bool
	maxInflight int

	ctx    context.Context // the publisher's life
	cancel context.CancelFunc
	slots  chan struct{} // one per batch in flight

	mu      sync.Mutex
	stream  databusv1.DataBus_PublishClient // nil while reconnecting
	nextID  uint64
	pending map[uint64]*call
	closed  bool
	idle    *sync.Cond // signalled when pending empties
}

type call struct {
	req  *databusv1.PublishRequest
	done func(error)
}

// NewPublisher opens a publish stream to topic. It does not wait for the
// gateway: the first batch tells whether the topic exists.
func (c *Client) NewPublisher(ctx context.Context, topic string, opts ...PublisherOption) (*Publisher, error) {
	p := &Publisher{c: c, topic: topic, maxInflight: 16, pending: map[uint64]*call{}}
	for _, o := range opts {
		o(p)
	}
	if topic == "" {
		return nil, errors.New("databus: NewPublisher needs a topic")
	}
	if p.maxInflight < 1 || p.maxInflight > 1024 {
		return nil, fmt.Errorf("databus: MaxInflight %d: give 1 to 1024", p.maxInflight)
	}
	p.idle = sync.NewCond(&p.mu)
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.slots = make(chan struct{}, p.maxInflight)
	p.mu.Lock()
	err := p.connectLocked()
	p.mu.Unlock()
	if err != nil {
		p.cancel()
		return nil, err
	}
	return p, nil
}

// connectLocked opens a stream and resends what is pending. Call with mu held.
func (p *Publisher) connectLocked() error {
	md := []string{databusv1.MDTopic, p.topic, databusv1.MDMaxInflight, strconv.Itoa(p.maxInflight)}
	if p.aggregation {
		md = append(md, databusv1.MDAggregation, "on")
	}
	stream, err := p.c.api.Publish(streamContext(p.ctx, md...))
	if err != nil {
		return fmt.Errorf("databus: open publish stream: %w", err)
	}
	p.stream = stream
	go p.receive(stream)
	ids := make([]uint64, 0, len(p.pending))
	for id := range p.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := stream.Send(p.pending[id].req); err != nil {
			break // receive sees the broken stream and reconnects
		}
	}
	return nil
}

// Publish sends msgs as one batch and waits until Kafka stored them. A
// *PublishError lists records that were not stored. When ctx ends first,
// Publish returns ctx's error and the batch may still be stored.
func (p *Publisher) Publish(ctx context.Context, msgs ...Message) error {
	done := make(chan error, 1)
	if err := p.PublishAsync(ctx, msgs, func(err error) { done <- err }); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PublishAsync sends msgs as one batch and calls done with the outcome
// (nil, a *PublishError, or the error that ended the stream) from another
// goroutine. It blocks while MaxInflight batches are in flight; it returns
// an error, and never calls done, when ctx ends first or the publisher is
// closed.
func (p *Publisher) PublishAsync(ctx context.Context, msgs []Message, done func(error)) error {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.ctx.Done():
		return ErrClosed
	}
	req := &databusv1.PublishRequest{Messages: make([]*databusv1.Message, len(msgs))}
	for i, m := range msgs {
		pm := &databusv1.Message{Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			pm.Headers = append(pm.Headers, &databusv1.Header{Key: h.Key, Value: h.Value})
		}
		req.Messages[i] = pm
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		<-p.slots
		return ErrClosed
	}
	p.nextID++
	req.BatchId = p.nextID
	p.pending[req.BatchId] = &call{req: req, done: done}
	if p.stream != nil {
		if err := p.stream.Send(req); err != nil {
			// receive sees the broken stream, reconnects and resends this.
			return nil
		}
	}
	return nil
}

// receive reads answers on one stream until it breaks, then reconnects.
func (p *Publisher) receive(stream databusv1.DataBus_PublishClient) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			p.broken(stream, err)
			return
		}
		p.mu.Lock()
		c := p.pending[resp.BatchId]
		delete(p.pending, resp.BatchId)
		if len(p.pending) == 0 {
			p.idle.Broadcast()
		}
		p.mu.Unlock()
		if c == nil {
			continue // an answer to a batch resent after a reconnect, answered twice
		}
		<-p.slots
		c.done(answerErr(resp))
	}
}

func answerErr(resp *databusv1.PublishResponse) error {
	if len(resp.Errors) == 0 {
		return nil
	}
	pe := &PublishError{Stored: int(resp.Stored)}
	for _, e := range resp.Errors {
		pe.Records = append(pe.Records, RecordError{Index: int(e.Index), Code: codes.Code(e.Code), Message: e.Message})
	}
	return pe
}

// broken handles the end of a stream: it fails every pending batch when
// the error is final, else reconnects with backoff and resends them.
func (p *Publisher) broken(stream databusv1.DataBus_PublishClient, err error) {
	p.mu.Lock()
	if p.stream != stream {
		p.mu.Unlock()
		return
	}
	p.stream = nil
	if p.closed || p.ctx.Err() != nil || !retryableCode(status.Code(err)) {
		p.failAllLocked(err)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	for attempt := 0; ; attempt++ {
		select {
		case <-p.ctx.Done():
			p.mu.Lock()
			p.failAllLocked(ErrClosed)
			p.mu.Unlock()
			return
		case <-time.After(p.c.backoff(attempt)):
		}
		p.mu.Lock()
		if p.closed {
			p.failAllLocked(ErrClosed)
			p.mu.Unlock()
			return
		}
		cerr := p.connectLocked()
		p.mu.Unlock()
		if cerr == nil {
			return
		}
	}
}

// failAllLocked ends every pending batch with err. Call with mu held.
func (p *Publisher) failAllLocked(err error) {
	for id, c := range p.pending {
		delete(p.pending, id)
		<-p.slots
		go c.done(err)
	}
	p.idle.Broadcast()
}

// Close waits until every batch in flight is answered (or failed), then
// ends the stream. Publishing after Close returns ErrClosed.
func (p *Publisher) Close() error {
	p.mu.Lock()
	p.closed = true
	for len(p.pending) > 0 && p.stream != nil {
		p.idle.Wait()
	}
	if p.stream != nil {
		p.stream.CloseSend()
	}
	p.failAllLocked(ErrClosed)
	p.mu.Unlock()
	p.cancel()
	return nil
}
