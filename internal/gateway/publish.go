package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Publish serves one publish stream: batches in, an answer per batch once
// Kafka stored (or refused) every record of it.
func (g *Gateway) Publish(stream databusv1.DataBus_PublishServer) error {
	g.streams.Add(1)
	defer g.streams.Done()
	if err := g.openStream(); err != nil {
		return g.ended(err)
	}
	defer g.closeStream()
	ctx := stream.Context()
	s, err := g.settingsFrom(ctx, false)
	if err != nil {
		return g.ended(err)
	}
	if !g.cfg.Echo {
		if err := g.checkTopic(ctx, s.topic); err != nil {
			return g.ended(err)
		}
	}
	p := &publisher{g: g, s: s, stream: stream, out: make(chan *databusv1.PublishResponse, s.maxInflight)}
	p.bytes.limit = g.cfg.MaxStreamBytes
	if !g.cfg.Echo && s.aggregation {
		// The codec's shared producer, made now if no stream used it
		// yet: a refusal comes before any batch is sent.
		if _, err := g.sharedProducer(s.compression); err != nil {
			return g.ended(err)
		}
	}
	if !g.cfg.Echo && !s.aggregation {
		// The stream's own producer, made on its first batch: its place
		// is taken now, so a refusal comes before any batch is sent.
		if err := g.acquireClient(clientProducer); err != nil {
			return g.ended(err)
		}
		defer g.releaseClient(clientProducer)
	}
	g.m.streams.WithLabelValues("publish").Inc()
	defer g.m.streams.WithLabelValues("publish").Dec()
	defer p.closeProducer()
	return g.ended(p.run(ctx))
}

type publisher struct {
	g      *Gateway
	s      streamSettings
	stream databusv1.DataBus_PublishServer
	// out carries answers from Kafka's callbacks to the stream's goroutine,
	// which sends them. It holds maxInflight answers, so a callback never
	// blocks (a blocked callback would stall every stream sharing the
	// aggregated producer).
	out chan *databusv1.PublishResponse

	// outstanding counts batches accepted and not yet answered. Only the
	// stream's goroutine, which both accepts and sends, touches it: an
	// answer is counted off before it is sent, so a client that waits for
	// answers never finds the gateway counting more than it has in flight.
	outstanding int

	producer *kgo.Client // this stream's own, made on its first batch

	// sendMu makes sends one at a time, as gRPC requires: the stream's
	// goroutine sends Kafka's answers, and in echo mode the receiving
	// goroutine answers at once, without handing each batch over (the
	// echo rows measure the transport, not a hand-off). closed is set
	// when the stream's goroutine ends; nothing is sent after it.
	sendMu  sync.Mutex
	sendErr error
	closed  bool

	// bytes counts the message bytes of batches read and not yet
	// answered (Config.MaxStreamBytes); the gateway's total is g.bytes.
	bytes budget

	held heldBytes // received batches' pooled bytes, until accepted (batchpool.go)
}

func (p *publisher) run(ctx context.Context) error {
	// Recv runs apart so a drain can end the stream while Recv blocks.
	type recv struct {
		req     *databusv1.PublishRequest
		size    int64 // batchBytes(req), counted once
		err     error
		refused error // an echo batch check refused: it ends the stream
	}
	reqs := make(chan recv)
	go func() {
		for {
			// Read no more while the stream's or the gateway's bytes in
			// flight are at their limits: gRPC's flow control then holds
			// the client back.
			if !p.waitForBytes(ctx) {
				return
			}
			var waitStart time.Time
			if p.g.m.on { // --metrics=false pays for no clock read
				waitStart = time.Now()
			}
			req, err := p.recv()
			var size int64
			if err == nil {
				if p.g.m.on {
					p.g.m.publishWait.Observe(time.Since(waitStart).Seconds())
				}
				size = batchBytes(req)
			}
			if err == nil && p.g.cfg.Echo {
				start := time.Now()
				refused := p.check(req, size)
				if refused == nil {
					resp := &databusv1.PublishResponse{BatchId: req.BatchId, Stored: uint32(len(req.Messages))}
					p.g.m.publishLatency.Observe(time.Since(start).Seconds())
					p.send(resp)
					continue
				}
				select {
				case reqs <- recv{refused: refused}:
				case <-ctx.Done():
				}
				return
			}
			if err == nil {
				p.hold(size)
			}
			select {
			case reqs <- recv{req: req, size: size, err: err}:
			case <-ctx.Done():
				if err == nil { // never accepted: count it off
					p.free(size)
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()

	// This goroutine sends Kafka's answers: no goroutine of its own for
	// sending, which at thousands of streams is memory, and per message a
	// hand-off.
	send := func(resp *databusv1.PublishResponse) {
		p.outstanding--
		p.send(resp)
	}
	finish := func(err error) error {
		for p.outstanding > 0 { // answer every accepted batch before ending
			send(<-p.out)
		}
		p.sendMu.Lock()
		defer p.sendMu.Unlock()
		p.closed = true
		if err == nil && p.sendErr != nil && ctx.Err() == nil {
			err = streamError(codes.Unavailable, "sending to the client failed: %v", p.sendErr)
		}
		return err
	}
	away := connGoingAway(ctx)
	for {
		select {
		case resp := <-p.out:
			send(resp)
		case <-p.g.draining:
			return finish(streamError(codes.Unavailable, "%v", ErrDraining))
		case <-away:
			return finish(databusv1.StreamMoved(movedMessage))
		case <-ctx.Done():
			// The client went away. The receiving goroutine may have seen
			// this before handing over Recv's error, so do not wait for it.
			return finish(nil)
		case r := <-reqs:
			if r.refused != nil {
				return finish(r.refused)
			}
			if errors.Is(r.err, io.EOF) {
				return finish(nil)
			}
			if tooLarge(r.err) {
				// gRPC has already ended the stream with its own status,
				// which the client recognizes; this only counts it.
				p.g.m.refusals.WithLabelValues(limitRecvBytes).Inc()
				return finish(r.err)
			}
			if r.err != nil {
				return finish(nil) // the client went away; nothing to answer
			}
			if err := p.accept(r.req, r.size); err != nil {
				p.free(r.size)
				return finish(err)
			}
		}
	}
}

// send sends one answer, unless a send failed before (the client is gone:
// answers are dropped) or the stream ended.
func (p *publisher) send(resp *databusv1.PublishResponse) {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if p.sendErr == nil && !p.closed {
		p.sendErr = p.stream.Send(resp)
	}
}

// check returns the error that refuses a batch of size message bytes
// whatever is in flight: too many messages, or more bytes than a stream
// may hold.
func (p *publisher) check(req *databusv1.PublishRequest, size int64) error {
	if n := len(req.Messages); n > p.g.cfg.MaxBatchMessages {
		return refusedBatch(req.BatchId, codes.InvalidArgument, "batch %d has %d messages, more than the limit %d: split it", req.BatchId, n, p.g.cfg.MaxBatchMessages)
	}
	if size > p.g.cfg.MaxStreamBytes {
		p.g.m.refusals.WithLabelValues(limitStreamBytes).Inc()
		return refusedBatch(req.BatchId, codes.ResourceExhausted, "batch %d has %d message bytes, more than a stream may have in flight (%d, the gateway's --max-stream-bytes): split it, or have the operator raise the limit", req.BatchId, size, p.g.cfg.MaxStreamBytes)
	}
	return nil
}

// accept starts producing one batch, whose answer comes through out, or
// returns the error that ends the stream (and no answer comes).
func (p *publisher) accept(req *databusv1.PublishRequest, size int64) error {
	// The request goes back to its pool once the records are made: they
	// point into the batch's bytes, not into its structs. The bytes go
	// with the batch, or back to their pool when there is none.
	defer req.ReturnToVTPool()
	buf := p.held.take(req)
	if err := p.check(req, size); err != nil {
		freeBytes(buf)
		return err
	}
	if p.outstanding >= p.s.maxInflight {
		freeBytes(buf)
		return streamError(codes.ResourceExhausted, "more than %d batches in flight: wait for answers before sending more, or open the stream with a higher %s", p.s.maxInflight, MDMaxInflight)
	}
	n := len(req.Messages)
	start := time.Now()
	resp := &databusv1.PublishResponse{BatchId: req.BatchId}
	if n == 0 {
		freeBytes(buf)
		resp.Stored = uint32(n)
		p.outstanding++
		p.free(size)
		p.answer(resp, start)
		return nil
	}
	producer, err := p.producerClient()
	if err != nil {
		freeBytes(buf)
		return streamError(codes.Unavailable, "%v", err)
	}
	p.outstanding++
	// The batch's records and their headers in one slice each, reused
	// from batch to batch (batchpool.go), one promise for all of them,
	// and the batch's arrival as their timestamp (franz-go would read the
	// clock per record): per message, what a producer writing to Kafka
	// itself would spend, no more.
	headers := 0
	for _, m := range req.Messages {
		headers += len(m.Headers)
	}
	b := newBatch(p, resp, buf, n, headers)
	b.start, b.size = start, size
	for i, m := range req.Messages {
		if size := messageBytes(m); size > p.g.cfg.MaxMessageBytes {
			b.fail(i, codes.InvalidArgument, "message of %d bytes is larger than the limit %d: split or shrink it", size, p.g.cfg.MaxMessageBytes)
			continue
		}
		rec := &b.recs[i]
		rec.Topic, rec.Key, rec.Value, rec.Timestamp = p.s.topic, orNil(m.Key), orNil(m.Value), start
		if len(m.Headers) > 0 {
			first := len(b.hs)
			for _, h := range m.Headers {
				b.hs = append(b.hs, kgo.RecordHeader{Key: h.Key, Value: orNil(h.Value)})
			}
			rec.Headers = b.hs[first:len(b.hs):len(b.hs)]
		}
		producer.Produce(p.g.ctx, rec, b.promiseFn)
	}
	return nil
}

// orNil is an empty key, value or header value as Kafka's null, as a
// message that leaves the field out arrives from protobuf: proto3 has no
// empty bytes apart from absent ones, and a pooled message keeps its
// last slices' memory as empty ones (ResetVT), which Kafka would store
// as empty, not null (a keyless record hashed to one partition, a
// tombstone turned into an empty value).
func orNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// producerClient returns the shared producer of the stream's codec for
// aggregated streams, else
// the stream's own, which does not linger: a latency-optimized client
// should not wait for others' records.
func (p *publisher) producerClient() (*kgo.Client, error) {
	if p.s.aggregation {
		return p.g.sharedProducer(p.s.compression)
	}
	if p.producer == nil {
		cl, err := newClient(p.g.producerOpts(p.s.compression, 0))
		if err != nil {
			return nil, err
		}
		p.producer = cl
	}
	return p.producer, nil
}

func (p *publisher) closeProducer() {
	if p.producer != nil {
		p.producer.Close()
	}
}

func (p *publisher) answer(resp *databusv1.PublishResponse, start time.Time) {
	p.g.m.publishLatency.Observe(time.Since(start).Seconds())
	p.out <- resp // never blocks: out holds maxInflight answers
}

// batch collects the outcome of one batch's records.
type batch struct {
	p         *publisher
	resp      *databusv1.PublishResponse
	start     time.Time
	size      int64        // message bytes, freed when answered
	recs      []kgo.Record // the batch's records, in its order
	hs        []kgo.RecordHeader
	buf       *[]byte                  // the bytes the records point into, from gRPC's pool
	promiseFn func(*kgo.Record, error) // b.promise, made once per pooled batch
	remaining atomic.Int32
	mu        sync.Mutex // over resp.Errors
	stores    atomic.Uint32
	bytes     atomic.Int64
}

// promise is Kafka's answer for one of b's records.
func (b *batch) promise(r *kgo.Record, err error) {
	if err != nil {
		b.fail(b.index(r), codeFor(err), "Kafka did not store the message: %s", b.p.g.produceFailure(r, err))
		return
	}
	bytes := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		bytes += len(h.Key) + len(h.Value)
	}
	b.stored(bytes)
}

// index is r's place in its batch; only a failure needs it.
func (b *batch) index(r *kgo.Record) int {
	for i := range b.recs {
		if &b.recs[i] == r {
			return i
		}
	}
	return -1
}

func (b *batch) stored(bytes int) {
	b.stores.Add(1)
	b.bytes.Add(int64(bytes))
	b.done()
}

func (b *batch) fail(i int, code codes.Code, format string, args ...any) {
	b.mu.Lock()
	b.resp.Errors = append(b.resp.Errors, &databusv1.RecordError{Index: uint32(i), Code: int32(code), Message: fmt.Sprintf("databus: "+format, args...)})
	b.mu.Unlock()
	b.p.g.m.publishErrors.WithLabelValues(code.String()).Inc()
	b.done()
}

func (b *batch) done() {
	if b.remaining.Add(-1) != 0 {
		return
	}
	b.mu.Lock()
	b.resp.Stored = b.stores.Load()
	sort.Slice(b.resp.Errors, func(i, j int) bool { return b.resp.Errors[i].Index < b.resp.Errors[j].Index })
	b.p.g.m.messagesIn.Add(float64(b.resp.Stored))
	b.p.g.m.bytesIn.Add(float64(b.bytes.Load()))
	b.mu.Unlock()
	b.p.free(b.size)
	b.p.answer(b.resp, b.start)
	b.release() // every promise ran: nothing holds the records
}

// batchBytes is what a batch counts against bytes limits: its messages'
// keys, values and headers.
func batchBytes(req *databusv1.PublishRequest) int64 {
	n := 0
	for _, m := range req.Messages {
		n += messageBytes(m)
	}
	return int64(n)
}

// messageBytes is one message's key, value and headers.
func messageBytes(m *databusv1.Message) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// hold counts a batch's bytes in flight; free counts them off.
func (p *publisher) hold(n int64) {
	p.bytes.add(n)
	p.g.bytes.add(n)
	p.g.m.publishBytes.Add(float64(n))
}

func (p *publisher) free(n int64) {
	p.bytes.release(n)
	p.g.bytes.release(n)
	p.g.m.publishBytes.Sub(float64(n))
}

// waitForBytes waits until the stream and the gateway are under their
// bytes limits; false when the stream ends first.
func (p *publisher) waitForBytes(ctx context.Context) bool {
	for {
		ch := p.bytes.wait()
		if ch == nil {
			ch = p.g.bytes.wait()
		}
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-p.g.draining:
			return false
		}
	}
}

// tooLarge reports whether Recv failed on a message over gRPC's receive
// limit (a server stream's Recv fails with ResourceExhausted for nothing
// else): gRPC refuses it unread and ends the stream with that status.
func tooLarge(err error) bool {
	return status.Code(err) == codes.ResourceExhausted
}
