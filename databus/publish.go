package databus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// ErrClosed is returned for publishes on a closed Publisher, and for acks
// and nacks on a closed Subscription.
var ErrClosed = errors.New("databus: closed")

// PublisherOption configures a Publisher.
type PublisherOption func(*Publisher)

// Aggregation asks the gateway to share its producers between this stream
// and others: better batching and less load on Kafka, at the cost of a few
// milliseconds of latency. Default off.
func Aggregation(on bool) PublisherOption { return func(p *Publisher) { p.aggregation = on } }

// Compression asks the gateway to compress this stream's record batches
// in Kafka with codec: none, gzip, snappy, lz4 or zstd
// (databusv1.Compressions). Default: the gateway's (--compression). A
// gateway that does not allow the codec (--compression-allowed) refuses
// the stream with InvalidArgument, which the first publish returns.
func Compression(codec string) PublisherOption {
	return func(p *Publisher) { p.compression = codec }
}

// MaxInflight sets how many batches may wait for their answer at once
// (default 16). PublishAsync blocks when that many are in flight.
func MaxInflight(n int) PublisherOption { return func(p *Publisher) { p.maxInflight = n } }

// Publisher publishes batches on one stream to one topic. Batches are
// pipelined; each is answered only after Kafka stored every record. When
// the stream breaks for a reason worth retrying (the gateway restarted or
// drains, the network blipped), the Publisher reconnects with backoff and
// resends every batch not yet answered, so a batch is stored at least once
// (a resent batch may be stored twice). When the gateway ends the stream
// with an error that retrying cannot fix (the topic does not exist, a
// batch is too large), the batch it concerns fails with that error at
// once, the others are resent on a new stream, and the stream is reopened
// for later batches: a publish succeeds again once the cause is gone. It
// is safe for concurrent use.
type Publisher struct {
	c           *Client
	topic       string
	aggregation bool
	compression string
	maxInflight int

	ctx    context.Context // the publisher's life
	cancel context.CancelFunc
	slots  chan struct{} // one per batch in flight

	mu           sync.Mutex
	stream       *pubStream // nil while disconnected
	reconnecting bool       // a goroutine is opening a stream
	nextID       uint64
	pending      map[uint64]*call
	closed       bool
	idle         *sync.Cond // signalled when pending empties
}

// pubStream is one publish stream and what ends it.
type pubStream struct {
	databusv1.DataBus_PublishClient
	cancel context.CancelFunc
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
	if p.compression != "" && !slices.Contains(databusv1.Compressions, p.compression) {
		return nil, fmt.Errorf("databus: Compression %q: give one of %v", p.compression, databusv1.Compressions)
	}
	p.idle = sync.NewCond(&p.mu)
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.slots = make(chan struct{}, p.maxInflight)
	stream, err := p.open()
	if err != nil {
		p.cancel()
		return nil, err
	}
	p.mu.Lock()
	p.installLocked(stream)
	p.mu.Unlock()
	return p, nil
}

// open opens a publish stream; it does not wait for the gateway's answer.
func (p *Publisher) open() (*pubStream, error) {
	md := []string{databusv1.MDTopic, p.topic, databusv1.MDMaxInflight, strconv.Itoa(p.maxInflight)}
	if p.aggregation {
		md = append(md, databusv1.MDAggregation, "on")
	}
	if p.compression != "" {
		md = append(md, databusv1.MDCompression, p.compression)
	}
	ctx, cancel := context.WithCancel(p.ctx)
	stream, err := p.c.api.Publish(streamContext(ctx, md...))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("databus: open publish stream: %w", err)
	}
	return &pubStream{DataBus_PublishClient: stream, cancel: cancel}, nil
}

// installLocked makes stream the publisher's and resends, in order,
// every batch not yet answered. Call with mu held.
func (p *Publisher) installLocked(stream *pubStream) {
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
	switch {
	case p.stream != nil:
		// An error means the stream broke: receive sees it, reconnects
		// and resends this batch.
		_ = p.stream.Send(req)
	case !p.reconnecting:
		// The last stream ended with a final error and nothing was left
		// to send: open one for this batch.
		p.reconnecting = true
		go p.reconnect(false)
	}
	return nil
}

// receive reads answers on one stream until it breaks.
func (p *Publisher) receive(stream *pubStream) {
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

// broken handles the end of a stream. After an error worth retrying it
// reconnects with backoff and resends every batch not yet answered. After
// a final error it fails the batch the error concerns and reopens the
// stream at once for the others, if any; else the next batch reopens it.
func (p *Publisher) broken(stream *pubStream, err error) {
	stream.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stream != stream {
		return
	}
	p.stream = nil
	if p.closed || p.ctx.Err() != nil {
		p.failAllLocked(err)
		return
	}
	id, refused := refusedBatch(err)
	retry := !refused && retryableStreamErr(err)
	if refused {
		if id == 0 {
			id = p.oversizedLocked(err)
		}
		err = batchRefusedError(err)
	}
	if !retry {
		p.failLocked(id, err)
		if len(p.pending) == 0 {
			return
		}
	}
	// A refused batch or a move ended the stream in good order: the rest
	// go on a new stream at once.
	p.reconnecting = true
	go p.reconnect(retry && !Moved(err))
}

// retryableStreamErr reports whether a publish stream that ended with err
// should be reopened and its batches resent. A stream the gateway ended
// without an error (io.EOF) answered every batch it accepted: the rest
// are resent.
func retryableStreamErr(err error) bool {
	return errors.Is(err, io.EOF) || retryableCode(status.Code(err))
}

// oversizedLocked returns the first batch not yet answered that is
// larger than the receive limit gRPC's refusal names, or 0. gRPC ends the
// stream as soon as it reads the length of a message too large, before
// the gateway has answered the batches it accepted ahead of it: the
// refused batch is not always the first one pending. Call with mu held.
func (p *Publisher) oversizedLocked(err error) uint64 {
	var size, limit int
	if _, e := fmt.Sscanf(status.Convert(err).Message(), "grpc: received message larger than max (%d vs. %d)", &size, &limit); e != nil {
		return 0
	}
	ids := slices.Sorted(maps.Keys(p.pending))
	for _, id := range ids {
		if p.pending[id].req.SizeVT() > limit {
			return id
		}
	}
	return 0
}

// failLocked fails batch id with err, a final error the gateway ended
// the stream with; when id is not pending (0: the gateway could not read
// the batch, or the error is about the stream), the first batch not yet
// answered. The gateway reads a stream's batches in order and, before
// ending it, answers every batch it accepted, so that batch is the one it
// refused; an error about the stream itself (an unknown topic, bad
// settings) concerns every batch, and each fails in turn on the streams
// reopened for the others. Call with mu held.
func (p *Publisher) failLocked(id uint64, err error) {
	if len(p.pending) == 0 {
		return
	}
	if _, ok := p.pending[id]; !ok {
		id = slices.Min(slices.Collect(maps.Keys(p.pending)))
	}
	c := p.pending[id]
	delete(p.pending, id)
	<-p.slots
	go c.done(err)
	if len(p.pending) == 0 {
		p.idle.Broadcast()
	}
}

// reconnect opens a new stream, after a backoff when wait is set and
// between failed attempts, and resends what is pending on it.
func (p *Publisher) reconnect(wait bool) {
	for attempt := 0; ; attempt++ {
		if wait || attempt > 0 {
			select {
			case <-p.ctx.Done():
				p.mu.Lock()
				p.reconnecting = false
				p.failAllLocked(ErrClosed)
				p.mu.Unlock()
				return
			case <-time.After(p.c.backoff(attempt)):
			}
		}
		stream, err := p.open()
		p.mu.Lock()
		switch {
		case p.closed:
			if stream != nil {
				stream.cancel()
			}
			p.reconnecting = false
			p.failAllLocked(ErrClosed)
			p.mu.Unlock()
			return
		case err == nil:
			p.reconnecting = false
			p.installLocked(stream)
			p.mu.Unlock()
			return
		case p.c.conn.GetState() == connectivity.Shutdown:
			// The Client was closed: no stream will open again.
			p.reconnecting = false
			p.closed = true
			p.failAllLocked(err)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
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
		p.stream = nil
	}
	p.failAllLocked(ErrClosed)
	p.mu.Unlock()
	p.cancel()
	return nil
}
