package activities

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
)

// Batcher defaults.
const (
	DefaultBatchRows     = 256
	DefaultBatchDelay    = 5 * time.Millisecond
	DefaultBatchFlushers = 2
)

// BatcherConfig bounds a Batcher. The zero value takes the defaults.
type BatcherConfig struct {
	// MaxRows seals a batch at this many rows (DefaultBatchRows).
	MaxRows int
	// MaxDelay seals a batch this long after its first row arrived
	// (DefaultBatchDelay), even when no flusher is free to take it yet.
	MaxDelay time.Duration
	// Flushers is how many batches are written at once
	// (DefaultBatchFlushers).
	Flushers int
	// MaxQueued bounds the rows waiting for a flusher; Add fails at once
	// with ErrUnavailable beyond it (default 64 x MaxRows).
	MaxQueued int
	// Timeout bounds the write of one batch (default 5 s).
	Timeout time.Duration
}

func (c *BatcherConfig) setDefaults() {
	defaults.Positive(&c.MaxRows, DefaultBatchRows)
	defaults.Positive(&c.MaxDelay, DefaultBatchDelay)
	defaults.Positive(&c.Flushers, DefaultBatchFlushers)
	defaults.Positive(&c.MaxQueued, 64*c.MaxRows)
	defaults.Positive(&c.Timeout, 5*time.Second)
}

// Batcher is a write-behind batcher: Add hands it one row and returns
// once the batch holding the row was written, so a client is acknowledged
// only after the database acknowledged its row.
//
// A batch is sealed when it holds MaxRows rows, when MaxDelay has passed
// since its first row, or as soon as a flusher is free: rows that arrive
// while the database is busy with earlier batches gather into the next
// one, as in a database's group commit. So one client at a time waits
// for nothing (its batch is one row, sent at once), and many clients
// share writes, waiting at most MaxDelay plus the writes ahead of them.
// Rows whose request gave up (its context ended) before their batch was
// sent are not written.
type Batcher struct {
	cfg    BatcherConfig
	write  func(ctx context.Context, rows []Activity, errs []error)
	in     chan *pending
	queued atomic.Int64
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once

	// Observe, when set before the first Add, is told the size of each
	// batch written and how long the write took.
	Observe func(rows int, took time.Duration, err error)
}

type pending struct {
	ctx  context.Context
	a    Activity
	done chan error // buffered: the flusher never blocks on it
}

// NewBatcher starts a batcher that writes through write (a
// Store.InsertBatch).
func NewBatcher(cfg BatcherConfig, write func(ctx context.Context, rows []Activity, errs []error)) *Batcher {
	cfg.setDefaults()
	b := &Batcher{
		cfg: cfg, write: write,
		in:   make(chan *pending, cfg.MaxRows),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go b.run()
	return b
}

// Add queues a for the next batch and waits until that batch was
// written, or ctx ends (then the row may still be written).
func (b *Batcher) Add(ctx context.Context, a Activity) error {
	if n := b.queued.Add(1); n > int64(b.cfg.MaxQueued) {
		b.queued.Add(-1)
		return fmt.Errorf("%w: %d rows already wait for the database", ErrUnavailable, n-1)
	}
	p := &pending{ctx: ctx, a: a, done: make(chan error, 1)}
	select {
	case b.in <- p:
	case <-ctx.Done():
		b.queued.Add(-1)
		return fmt.Errorf("%w: %w", ErrUnavailable, context.Cause(ctx))
	case <-b.quit:
		b.queued.Add(-1)
		return ErrClosed
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the batch: %w", ErrUnavailable, context.Cause(ctx))
	}
}

// Close stops taking rows, writes what is queued and returns when every
// batch is written.
func (b *Batcher) Close() {
	b.once.Do(func() { close(b.quit) })
	<-b.done
}

func (b *Batcher) run() {
	defer close(b.done)
	var (
		open   []*pending   // the batch rows are added to
		sealed [][]*pending // full or overdue, waiting for a flusher
		idle   = b.cfg.Flushers
		freed  = make(chan struct{}, b.cfg.Flushers)
		timer  = time.NewTimer(time.Hour)
		wg     sync.WaitGroup
	)
	timer.Stop()
	seal := func() {
		if len(open) > 0 {
			sealed = append(sealed, open)
			open = nil
			timer.Stop()
		}
	}
	add := func(p *pending) {
		open = append(open, p)
		if len(open) == 1 {
			timer.Reset(b.cfg.MaxDelay)
		}
		if len(open) >= b.cfg.MaxRows {
			seal()
		}
	}
	// drain moves what already waits in the channel into the open batch,
	// up to a full batch, without waiting.
	drain := func() {
		for len(open) < b.cfg.MaxRows {
			select {
			case p := <-b.in:
				add(p)
			default:
				return
			}
		}
	}
	quitting := false
	for {
		if quitting && len(open) == 0 && len(sealed) == 0 {
			select {
			case p := <-b.in: // raced with Close: still written
				add(p)
			default:
				wg.Wait()
				return
			}
		}
		if idle > 0 && len(sealed) == 0 {
			drain()
			seal()
		}
		for idle > 0 && len(sealed) > 0 {
			batch := sealed[0]
			sealed = sealed[1:]
			idle--
			wg.Go(func() {
				b.flush(batch)
				freed <- struct{}{}
			})
		}
		if quitting {
			if idle < b.cfg.Flushers {
				<-freed
				idle++
			}
			continue
		}
		select {
		case p := <-b.in:
			add(p)
		case <-timer.C:
			seal()
		case <-freed:
			idle++
		case <-b.quit:
			quitting = true
		}
	}
}

// flush writes one batch and answers its rows.
func (b *Batcher) flush(batch []*pending) {
	defer b.queued.Add(-int64(len(batch)))
	rows := make([]Activity, 0, len(batch))
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.done <- fmt.Errorf("%w: gave up before the batch was sent: %w", ErrUnavailable, err)
			continue
		}
		rows = append(rows, p.a)
		live = append(live, p)
	}
	if len(rows) == 0 {
		return
	}
	errs := make([]error, len(rows))
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	start := time.Now()
	b.write(ctx, rows, errs)
	cancel()
	if b.Observe != nil {
		var first error
		for _, err := range errs {
			if err != nil {
				first = err
				break
			}
		}
		b.Observe(len(rows), time.Since(start), first)
	}
	for i, p := range live {
		p.done <- errs[i]
	}
}
