package checker

import (
	"context"
	"math/rand/v2"
	"time"
)

// MaxRate bounds Config.Rate: a billion messages a second is far beyond
// any one machine, and a larger figure is a typo.
const MaxRate = 1e9

// batchPeriod is how often each stream sends a batch: the ticker's
// Interval, the period that makes Rate for the other scenarios, or 0 (as
// fast as the in-flight limit allows).
func (c *Config) batchPeriod() time.Duration {
	switch {
	case c.Scenario == Ticker:
		return c.Interval
	case c.Rate > 0:
		return max(time.Duration(float64(c.Streams*c.Batch)/c.Rate*float64(time.Second)), 1)
	}
	return 0
}

// pacer spaces one stream's batches a period apart, from a random phase
// after begin, so that streams do not send in step. A stream that falls
// behind (its in-flight limit reached) sends its late batches at once:
// the rate offered stays the rate asked while the server keeps up, and
// a server that does not shows as a rate below it.
type pacer struct {
	every time.Duration
	next  time.Time
	timer *time.Timer
}

// newPacer paces batches every period from begin; a zero period sends
// as fast as the stream can.
func newPacer(begin time.Time, every time.Duration) *pacer {
	p := &pacer{every: every}
	if every > 0 {
		p.next = begin.Add(time.Duration(rand.Int64N(int64(every) + 1)))
		p.timer = time.NewTimer(time.Until(p.next))
	}
	return p
}

// wait waits for the next batch's time: false when that time falls after
// end or ctx ends first.
func (p *pacer) wait(ctx context.Context, end time.Time) bool {
	if p.timer == nil {
		return ctx.Err() == nil
	}
	if p.next.After(end) {
		return false
	}
	select {
	case <-p.timer.C:
	case <-ctx.Done():
		return false
	}
	p.next = p.next.Add(p.every)
	p.timer.Reset(time.Until(p.next))
	return true
}

func (p *pacer) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}
