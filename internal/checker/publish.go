package checker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/highload-lab/hlab/databus"
)

// window is the measured part of a run: what completes in it counts.
type window struct{ start, end time.Time }

func (w window) contains(t time.Time) bool { return !t.Before(w.start) && !t.After(w.end) }

// publishers are the run's publish streams.
type publishers struct {
	cfg    *Config
	run    uint64
	led    *ledger
	lat    *hist
	errs   *errorCounts
	values values // the messages' values: read-only, shared

	clients []*databus.Client
	pubs    []*databus.Publisher
	seqs    []int64 // next sequence number, per stream (its goroutine's own)

	begin          time.Time
	win            window
	windowMsgs     atomic.Int64
	windowBatches  atomic.Int64
	acked, failed  atomic.Int64
	batchesStarted atomic.Int64
}

func newPublishers(cfg *Config, run uint64, led *ledger, errs *errorCounts) *publishers {
	return &publishers{
		cfg: cfg, run: run, led: led, lat: newHist(), errs: errs,
		values: newValues(cfg.Payload, cfg.MessageBytes),
		pubs:   make([]*databus.Publisher, cfg.Streams),
		seqs:   make([]int64, cfg.Streams),
	}
}

// openWorkers bounds how many streams open at once: thousands of
// simultaneous TLS-less dials are fine, but not unbounded goroutines.
const openWorkers = 128

// open dials the connections, opens every stream and publishes one
// message on each, waiting for its answer: a stream counts as open when
// it has carried a message end to end. An error that retrying cannot fix
// (unknown topic, bad settings) ends the run.
func (p *publishers) open(ctx context.Context) error {
	conns := p.cfg.Connections
	if conns == 0 || conns > p.cfg.Streams {
		conns = p.cfg.Streams
	}
	for range conns {
		c, err := databus.Dial(p.cfg.Target, p.cfg.Credentials.Options()...)
		if err != nil {
			return err
		}
		p.clients = append(p.clients, c)
	}
	opts := []databus.PublisherOption{databus.Aggregation(p.cfg.Aggregation), databus.MaxInflight(p.cfg.Inflight)}
	if p.cfg.Compression != "" {
		opts = append(opts, databus.Compression(p.cfg.Compression))
	}
	return forEach(ctx, p.cfg.Streams, openWorkers, func(ctx context.Context, i int) error {
		pub, err := p.clients[i%len(p.clients)].NewPublisher(ctx, p.cfg.topicOf(i), opts...)
		if err != nil {
			return fmt.Errorf("checker: stream %d: %w", i, err)
		}
		p.pubs[i] = pub
		ids, msgs := p.batch(i, 1, time.Now())
		if err := pub.Publish(ctx, msgs...); err != nil {
			p.countErr(err, 1)
			return fmt.Errorf("checker: first message on stream %d: %w", i, err)
		}
		p.led.ack(i, ids)
		p.acked.Add(1)
		return nil
	})
}

// batch makes stream's next n messages, sent at sent.
func (p *publishers) batch(stream, n int, sent time.Time) ([]ID, []databus.Message) {
	ids := make([]ID, n)
	msgs := make([]databus.Message, n)
	for j := range n {
		id := ID{Stream: stream, Seq: p.seqs[stream]}
		p.seqs[stream]++
		ids[j] = id
		msgs[j] = databus.Message{Value: p.values.of(stream, id.Seq), Headers: []databus.Header{{Key: metaHeader, Value: encodeMeta(p.run, id, sent)}}}
	}
	return ids, msgs
}

// publish runs every stream's scenario from begin (the warm-up) until
// the measured window ends, then waits for the batches in flight.
func (p *publishers) publish(ctx context.Context, begin time.Time, win window) {
	p.runStreams(ctx, begin, win, len(p.pubs), p.stream)
}

// runStreams runs stream(ctx, i) for each of n streams, from begin (the
// warm-up) until the window ends, and returns once all have returned.
func (p *publishers) runStreams(ctx context.Context, begin time.Time, win window, n int, stream func(context.Context, int)) {
	p.win = win
	p.begin = begin
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stream(ctx, i) })
	}
	wg.Wait()
}

func (p *publishers) stream(ctx context.Context, i int) {
	pub := p.pubs[i]
	slots := make(chan struct{}, p.cfg.Inflight)
	defer func() {
		// Wait for every batch in flight: its answer, or its failure. A
		// gateway that never answers is given DrainTimeout; close then
		// fails what is left.
		limit := time.NewTimer(max(p.cfg.DrainTimeout, time.Second))
		defer limit.Stop()
		for range p.cfg.Inflight {
			select {
			case slots <- struct{}{}:
			case <-limit.C:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	pace := newPacer(p.begin, p.cfg.batchPeriod())
	defer pace.stop()
	for {
		if !pace.wait(ctx, p.win.end) {
			return
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		t0 := time.Now()
		if t0.After(p.win.end) {
			<-slots
			return
		}
		ids, msgs := p.batch(i, p.cfg.Batch, t0)
		p.batchesStarted.Add(1)
		err := pub.PublishAsync(ctx, msgs, func(err error) {
			p.done(i, ids, t0, err)
			<-slots
		})
		if err != nil {
			<-slots
			p.failed.Add(int64(len(ids)))
			p.countErr(err, int64(len(ids)))
			if ctx.Err() != nil || errors.Is(err, databus.ErrClosed) {
				return
			}
		}
	}
}

// done records a batch's answer.
func (p *publishers) done(stream int, ids []ID, t0 time.Time, err error) {
	now := time.Now()
	stored := ids
	if err != nil {
		var pe *databus.PublishError
		if !errors.As(err, &pe) {
			p.failed.Add(int64(len(ids)))
			p.countErr(err, int64(len(ids)))
			return
		}
		// Some records were stored: check off those only.
		bad := map[int]bool{}
		for _, r := range pe.Records {
			bad[r.Index] = true
			p.errs.add(r.Code.String(), 1)
		}
		stored = stored[:0:0]
		for j, id := range ids {
			if !bad[j] {
				stored = append(stored, id)
			}
		}
	}
	p.answered(stream, stored, len(ids), t0, now)
}

// answered records a batch of sent messages, sent at t0 and answered at
// now, of which stored were stored: they are acked, the rest failed.
func (p *publishers) answered(stream int, stored []ID, sent int, t0, now time.Time) {
	p.failed.Add(int64(sent - len(stored)))
	p.led.ack(stream, stored)
	n := int64(len(stored))
	p.acked.Add(n)
	if p.win.contains(t0) && p.win.contains(now) {
		p.windowMsgs.Add(n)
		p.windowBatches.Add(1)
		p.lat.record(now.Sub(t0), 1)
	}
}

func (p *publishers) countErr(err error, n int64) {
	code := status.Code(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, databus.ErrClosed) {
		code = codes.Canceled
	}
	p.errs.add(code.String(), n)
}

// close ends every stream (answering what is in flight) and connection.
// Streams still waiting for answers after a while are cut by closing
// their connections.
func (p *publishers) close() {
	var wg sync.WaitGroup
	for _, pub := range p.pubs {
		if pub != nil {
			wg.Go(func() { pub.Close() })
		}
	}
	closed := make(chan struct{})
	go func() { wg.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
	}
	for _, c := range p.clients {
		c.Close()
	}
	<-closed
}

// forEach runs fn(i) for i in [0, n) on up to workers goroutines and
// returns the first error; after an error no new fn starts.
func forEach(ctx context.Context, n, workers int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}
