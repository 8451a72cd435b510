package checker

import (
	"maps"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// maxLatency bounds what a histogram records (longer is clamped): one
// minute, in microseconds.
const maxLatency = int64(time.Minute / time.Microsecond)

// hist is a latency histogram in microseconds, safe for concurrent use.
type hist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func newHist() *hist { return &hist{h: hdrhistogram.New(1, maxLatency, 3)} }

func clampUs(d time.Duration) int64 {
	return min(max(int64(d/time.Microsecond), 1), maxLatency)
}

// record adds one latency, n times (a batch's messages share it).
func (h *hist) record(d time.Duration, n int64) {
	h.mu.Lock()
	h.h.RecordValues(clampUs(d), n)
	h.mu.Unlock()
}

// recordAll adds several latencies under one lock.
func (h *hist) recordAll(ds []time.Duration) {
	h.mu.Lock()
	for _, d := range ds {
		h.h.RecordValue(clampUs(d))
	}
	h.mu.Unlock()
}

// Latencies summarizes a latency distribution, in milliseconds.
type Latencies struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

func (h *hist) summary() Latencies {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := func(us int64) float64 { return float64(us) / 1000 }
	if h.h.TotalCount() == 0 {
		return Latencies{}
	}
	return Latencies{
		Count: h.h.TotalCount(),
		Mean:  h.h.Mean() / 1000,
		P50:   ms(h.h.ValueAtQuantile(50)),
		P90:   ms(h.h.ValueAtQuantile(90)),
		P99:   ms(h.h.ValueAtQuantile(99)),
		P999:  ms(h.h.ValueAtQuantile(99.9)),
		Max:   ms(h.h.Max()),
	}
}

// errorCounts counts errors by gRPC status code name.
type errorCounts struct {
	mu sync.Mutex
	m  map[string]int64
}

func (e *errorCounts) add(code string, n int64) {
	e.mu.Lock()
	if e.m == nil {
		e.m = map[string]int64{}
	}
	e.m[code] += n
	e.mu.Unlock()
}

func (e *errorCounts) snapshot() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int64{} // "errors": {} in the JSON when none failed, not null
	maps.Copy(out, e.m)
	return out
}
