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
	"google.golang.org/grpc"
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
	p := &publisher{g: g, s: s, stream: stream}
	p.status, _ = grpc.ServerTransportStreamFromContext(ctx).(statusWriter)
	p.conn = gatedConnOf(ctx)
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
	// out carries answers from Kafka's callbacks to the stream's sender,
	// which sends them. It holds maxInflight answers, so a callback never
	// blocks (a blocked callback would stall every stream sharing the
	// aggregated producer). It is the sender's: taken from a pool when
	// the sender starts and given back, empty, when it exits, so that an
	// idle stream holds none (answerQueue). Set and cleared under mu,
	// while no answer is due.
	out chan *databusv1.PublishResponse
	// status ends the stream from another goroutine than its handler's,
	// interrupting the handler's Recv (grpc-go's transport stream:
	// writing the status cancels the stream's context).
	status statusWriter
	// conn is the gate's connection the stream runs on (nil for one the
	// gate does not see): its GOAWAY ends the stream as moved. The
	// stream is in its list of publish streams, under conn.mu.
	conn               *gatedConn
	connPrev, connNext *publisher

	// mu guards the stream's state between its handler, which reads and
	// accepts batches, its sender, and end, called by a drain or the
	// connection's GOAWAY; cond is signalled when the sender exits.
	mu   sync.Mutex
	cond sync.Cond
	// outstanding counts batches accepted and not yet answered: an
	// answer is counted off before it is sent, so a client that waits
	// for answers never finds the gateway counting more than it has in
	// flight.
	outstanding int
	// ending is why the stream ends (a drain, a GOAWAY, or the handler's
	// own reason); selfEnding: the handler ends it and returns the
	// status; statusWritten: it was written from outside the handler.
	ending error
	// sending: the sender goroutine runs; it runs only while answers are
	// due, so that an idle stream is its handler alone, blocked in Recv.
	// (The flags sit together, and with closed, to keep the struct in a
	// smaller size class: it is the bulk of an idle stream's own memory.)
	sending       bool
	selfEnding    bool
	statusWritten bool
	// closed is set, under sendMu, when the stream ends; nothing is sent
	// after it.
	closed bool

	producer *kgo.Client // this stream's own, made on its first batch

	// sendMu makes sends one at a time, as gRPC requires: the sender
	// sends Kafka's answers, and in echo mode the handler answers at
	// once, without handing each batch over (the echo rows measure the
	// transport, not a hand-off).
	sendMu  sync.Mutex
	sendErr error

	// bytes counts the message bytes of batches read and not yet
	// answered (Config.MaxStreamBytes); the gateway's total is g.bytes.
	bytes budget
}

// errEnding is accept's refusal of a batch read once the stream is
// ending: not an error of the stream's.
var errEnding = errors.New("gateway: the stream is ending")

// statusWriter is what grpc-go's server transport stream (the
// grpc.ServerTransportStream in a handler's context) has for the server
// to end a stream with its status; a handler that has it can end its
// stream from another goroutine, and a Recv blocked on the stream then
// returns.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// run serves the stream on its handler goroutine: it reads batches and
// accepts them; a sender goroutine, started while answers are due, sends
// them. A drain or the connection's GOAWAY ends the stream in good order
// through end: nothing more is accepted, every accepted batch is
// answered, then the status is written, which makes a Recv blocked on
// the stream return. So an idle stream costs one goroutine, as on a bare
// grpc-go server, not a second one kept to watch for the drain.
func (p *publisher) run(ctx context.Context) error {
	p.cond.L = &p.mu
	if p.conn != nil {
		p.conn.addPublisher(p)
		defer p.conn.removePublisher(p)
	}
	p.g.addPublisher(p)
	defer p.g.removePublisher(p)
	// The quota state of the stream's token, shared with its other
	// streams (quota.go), nil when the gateway checks no tokens: a local,
	// not a field, which would move publisher to a larger size class.
	caller := callerOf(ctx)
	for {
		// Read no more while the stream's or the gateway's bytes in
		// flight are at their limits: gRPC's flow control then holds the
		// client back.
		if !p.waitForBytes(ctx) {
			return p.finish(ctx, nil)
		}
		// Past its token's publish rate, the stream reads its next batch
		// only when the batches before are paid for: the client is held
		// back by flow control, and the gateway holds nothing meanwhile.
		if caller != nil && !caller.waitTurn(ctx, p.g.draining) {
			return p.finish(ctx, nil)
		}
		var waitStart time.Time
		if p.g.m.on { // --metrics=false pays for no clock read
			waitStart = time.Now()
		}
		req, buf, err := p.recv()
		switch {
		case errors.Is(err, io.EOF):
			return p.finish(ctx, nil)
		case tooLarge(err):
			// gRPC has already ended the stream with its own status,
			// which the client recognizes; this only counts it.
			p.g.m.refusals.WithLabelValues(limitRecvBytes).Inc()
			return p.finish(ctx, err)
		case err != nil:
			return p.finish(ctx, nil) // ended from outside, or the client went away
		}
		if p.g.m.on {
			p.g.m.publishWait.Observe(time.Since(waitStart).Seconds())
		}
		size := batchBytes(req)
		if caller != nil {
			caller.received(len(req.Messages), size)
		}
		if p.g.cfg.Echo {
			start := time.Now()
			if err := p.check(req, size); err != nil {
				return p.finish(ctx, err)
			}
			resp := &databusv1.PublishResponse{BatchId: req.BatchId, Stored: uint32(len(req.Messages))}
			p.g.m.publishLatency.Observe(time.Since(start).Seconds())
			returnRequest(req) // the answer holds nothing of it
			p.send(resp)
			continue
		}
		p.hold(size)
		if err := p.accept(req, buf, size); err != nil {
			p.free(size)
			if err == errEnding {
				err = nil
			}
			return p.finish(ctx, err)
		}
	}
}

// end ends the stream in good order with err, from outside its handler
// (a drain, the connection's GOAWAY): nothing more is accepted; once
// every accepted batch is answered the status is written, by end itself
// when none is due, else by the sender after the last answer. A stream
// already ending is left as it is.
func (p *publisher) end(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ending != nil || p.selfEnding {
		return
	}
	p.ending = err
	if p.outstanding == 0 && !p.sending {
		p.writeStatusLocked()
	}
}

// writeStatusLocked writes the stream's ending status now, which makes
// its handler's Recv return. p.mu is held.
func (p *publisher) writeStatusLocked() {
	p.statusWritten = true
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	p.closed = true
	if p.status != nil {
		p.status.WriteStatus(status.Convert(p.ending))
	}
}

// finish ends the stream from its handler with err (nil: the client is
// done or gone), unless it was ended from outside, whose status it
// returns: it waits until every accepted batch is answered.
func (p *publisher) finish(ctx context.Context, err error) error {
	p.mu.Lock()
	if !p.statusWritten {
		p.selfEnding = true
		if p.ending == nil {
			p.ending = err
		}
	}
	for p.sending {
		p.cond.Wait()
	}
	if err == nil && !p.statusWritten && p.ending == nil {
		select {
		case <-p.g.draining: // waitForBytes gave up for the drain
			p.ending = p.drainError()
		default:
		}
	}
	err = p.ending
	p.mu.Unlock()
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	p.closed = true
	if err == nil && p.sendErr != nil && ctx.Err() == nil {
		err = streamError(codes.Unavailable, "sending to the client failed: %v", p.sendErr)
	}
	return err
}

// sendAnswers sends Kafka's answers while any is due, then exits; after
// the last, it writes the status of a stream ended from outside.
func (p *publisher) sendAnswers() {
	for {
		resp := <-p.out
		p.mu.Lock()
		p.outstanding--
		p.mu.Unlock()
		p.send(resp)
		p.mu.Lock()
		if p.outstanding > 0 {
			p.mu.Unlock()
			continue
		}
		p.sending = false
		putAnswerQueue(p.out) // empty: every accepted batch was answered
		p.out = nil
		if p.ending != nil && !p.selfEnding && !p.statusWritten {
			p.writeStatusLocked()
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		return
	}
}

// answerQueues are senders' answer channels (publisher.out) of the
// capacity last asked for: a stream that goes idle gives its channel
// back (224 bytes at the default 16 in flight, more than half of what an
// idle stream held of its own), and the next sender to start takes it.
var answerQueues sync.Pool

func newAnswerQueue(n int) chan *databusv1.PublishResponse {
	if q, ok := answerQueues.Get().(chan *databusv1.PublishResponse); ok && cap(q) == n {
		return q
	}
	return make(chan *databusv1.PublishResponse, n)
}

func putAnswerQueue(q chan *databusv1.PublishResponse) { answerQueues.Put(q) }

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
// returns the error that ends the stream (and no answer comes). A batch
// read once the stream is ending is not accepted and never answered: the
// client resends it elsewhere.
func (p *publisher) accept(req *databusv1.PublishRequest, buf *[]byte, size int64) error {
	// The request goes back to its pool once the records are made: they
	// point into the batch's bytes (buf), not into its structs. The bytes
	// go with the batch, or back to their pool when there is none.
	defer returnRequest(req)
	if err := p.check(req, size); err != nil {
		freeBytes(buf)
		return err
	}
	n := len(req.Messages)
	start := time.Now()
	resp := &databusv1.PublishResponse{BatchId: req.BatchId}
	var producer *kgo.Client
	if n > 0 {
		var err error
		if producer, err = p.producerClient(); err != nil {
			freeBytes(buf)
			return streamError(codes.Unavailable, "%v", err)
		}
	}
	p.mu.Lock()
	switch {
	case p.ending != nil:
		p.mu.Unlock()
		freeBytes(buf)
		return errEnding
	case p.outstanding >= p.s.maxInflight:
		p.mu.Unlock()
		freeBytes(buf)
		return streamError(codes.ResourceExhausted, "more than %d batches in flight: wait for answers before sending more, or open the stream with a higher %s", p.s.maxInflight, MDMaxInflight)
	}
	p.outstanding++
	startSender := !p.sending
	if startSender {
		p.out = newAnswerQueue(p.s.maxInflight)
	}
	p.sending = true
	p.mu.Unlock()
	if startSender {
		go p.sendAnswers()
	}
	if n == 0 {
		freeBytes(buf)
		resp.Stored = uint32(n)
		p.free(size)
		p.answer(resp, start)
		return nil
	}
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
