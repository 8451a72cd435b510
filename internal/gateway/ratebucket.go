package gateway

import "time"

// rateBucket is a token bucket that lets a batch through whole and then
// owes its cost: take never refuses and never waits, whatever the batch's
// size (a batch larger than the burst would deadlock a bucket that waits
// for its whole cost to be there first, as rate.Limiter.WaitN refuses
// it), and owed says how long until the debt is paid. A publish stream
// waits that long before it reads its next batch, so that what waits is
// the client, held by HTTP/2 flow control, not a batch in the gateway's
// memory, a lock, or a Kafka producer.
//
// The burst is one second's worth: a caller idle for a second may send
// that much at once. Over any span of t seconds the streams sharing a
// bucket get through at most rate*t, plus the burst, plus one batch each
// (the one each read before owing).
//
// It is not safe for concurrent use: its owner (caller) locks it.
type rateBucket struct {
	rate  float64   // tokens a second; 0: no limit
	level float64   // tokens at `at`; below 0: the debt of batches let through
	at    time.Time // when level was last brought up to date
}

// setRate makes the bucket fill at rate tokens a second from now on (0:
// no limit), at once: a debt run up at the old rate is paid at the new.
// A bucket that had no limit starts full.
func (b *rateBucket) setRate(rate float64, now time.Time) {
	if b.rate == 0 {
		b.level = rate
	} else {
		b.refill(now)
	}
	b.rate, b.at = rate, now
	b.level = min(b.level, b.burst())
}

func (b *rateBucket) burst() float64 { return b.rate }

// refill adds what the time since the last refill earned, up to the burst.
func (b *rateBucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.level = min(b.burst(), b.level+b.rate*d.Seconds())
		b.at = now
	}
}

// take counts n tokens as used now, going into debt if there are fewer.
func (b *rateBucket) take(n float64, now time.Time) {
	if b.rate == 0 {
		return
	}
	b.refill(now)
	b.level -= n
}

// owed is how long from now until the bucket's debt is paid: 0 when it
// has none, or no limit.
func (b *rateBucket) owed(now time.Time) time.Duration {
	if b.rate == 0 {
		return 0
	}
	b.refill(now)
	if b.level >= 0 {
		return 0
	}
	// Rounded up: a wait that ends a hair early would find a debt left
	// and wait again for a nanosecond.
	return time.Duration(-b.level/b.rate*float64(time.Second)) + time.Nanosecond
}
