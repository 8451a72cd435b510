package loadgen

import (
	"math"
	"time"
)

// A Pacer decides when the open model sends each request. Run asks it for
// the intended send time of every request in turn and measures latency from
// that time, so a request sent late (all connections busy, or the generator
// starved of CPU) still carries its lateness in its latency.
type Pacer interface {
	// At returns when request n (counting from 0) is intended to be sent,
	// as an offset from the start of the run. It must not decrease as n
	// grows, and it is called from one goroutine at a time.
	At(n uint64) time.Duration
}

var _ Pacer = ConstantPacer{}

// ConstantPacer sends Freq requests per second, evenly spaced: request n is
// due at n/Freq seconds.
type ConstantPacer struct {
	Freq float64 // requests per second, > 0
}

// At implements Pacer.
func (p ConstantPacer) At(n uint64) time.Duration {
	return time.Duration(math.Round(float64(n) * 1e9 / p.Freq))
}

// dueBefore returns how many requests p intends to send before offset t,
// that is the smallest n with p.At(n) >= t. It relies on At not decreasing.
func dueBefore(p Pacer, t time.Duration) uint64 {
	if p.At(0) >= t {
		return 0
	}
	lo, hi := uint64(0), uint64(1) // p.At(lo) < t
	for p.At(hi) < t {
		lo = hi
		if hi > math.MaxUint64/2 {
			return math.MaxUint64
		}
		hi *= 2
	}
	for hi-lo > 1 { // p.At(lo) < t <= p.At(hi)
		mid := lo + (hi-lo)/2
		if p.At(mid) < t {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}
