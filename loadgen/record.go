package loadgen

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// maxShards bounds the memory of a run: a histogram from 1 µs to 1 hour at
// 3 significant digits takes about 190 KB, and the open model may run 1000
// workers. Workers share shard id%len(shards); with few connections each has
// its own and its mutex is never contended.
const maxShards = 16

// recorder collects what the workers measure.
type recorder struct {
	open   bool
	shards []shard
}

type shard struct {
	mu sync.Mutex
	// corrected is latency from the intended send time; in the closed model
	// it is the only one (intended and actual send times coincide).
	corrected, uncorrected *hdrhistogram.Histogram
	sumCorr, sumUnc        time.Duration
	maxCorr, maxUnc        time.Duration
	requests, successes    int64
	status                 [600]int64
	otherStatus            map[int]int64
	errs                   [numKinds]int64
	lastEnd                time.Duration // offset from start of the last completion
	_                      [64]byte      // keep neighbours' mutexes off this cache line
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, maxRecordableLatencyUs, 3)
}

// newRecorder returns a recorder for up to workers workers.
func newRecorder(open bool, workers int) *recorder {
	n := min(workers, maxShards)
	r := &recorder{open: open, shards: make([]shard, n)}
	for i := range r.shards {
		r.shards[i].corrected = newHistogram()
		if open {
			r.shards[i].uncorrected = newHistogram()
		}
	}
	return r
}

func (r *recorder) shardFor(worker int) *shard {
	return &r.shards[worker%len(r.shards)]
}

// record stores one finished request. intended, sent and end are offsets
// from the recorder's start; intended == sent in the closed model. status is
// 0 when err != nil.
func (s *shard) record(intended, sent, end time.Duration, status int, err error) {
	corr, unc := end-intended, end-sent
	kind := -1
	if err != nil {
		kind = kindOf(err)
	}

	s.mu.Lock()
	s.requests++
	if kind >= 0 {
		s.errs[kind]++
	} else {
		if status >= 200 && status <= 399 {
			s.successes++
		}
		if status >= 0 && status < len(s.status) {
			s.status[status]++
		} else {
			if s.otherStatus == nil {
				s.otherStatus = make(map[int]int64)
			}
			s.otherStatus[status]++
		}
	}
	recordLatency(s.corrected, corr)
	s.sumCorr += corr
	s.maxCorr = max(s.maxCorr, corr)
	if s.uncorrected != nil {
		recordLatency(s.uncorrected, unc)
		s.sumUnc += unc
		s.maxUnc = max(s.maxUnc, unc)
	}
	s.lastEnd = max(s.lastEnd, end)
	s.mu.Unlock()
}

func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := (int64(d) + 500) / 1000
	// Beyond the histogram's range the value is clamped, not dropped: a
	// dropped outlier would make the tail look better than it was.
	_ = h.RecordValue(min(max(us, 0), maxRecordableLatencyUs))
}

// counts returns finished and failed requests, for progress reports.
func (r *recorder) counts() (requests, failed int64) {
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		requests += s.requests
		failed += s.requests - s.successes
		s.mu.Unlock()
	}
	return requests, failed
}

// merged is the union of all shards.
type merged struct {
	corrected, uncorrected *hdrhistogram.Histogram
	sumCorr, sumUnc        time.Duration
	maxCorr, maxUnc        time.Duration
	requests, successes    int64
	status                 map[int]int64
	errs                   map[string]int64
	lastEnd                time.Duration
}

// merge must be called after all workers stopped.
func (r *recorder) merge() *merged {
	m := &merged{
		corrected: newHistogram(),
		status:    make(map[int]int64),
		errs:      make(map[string]int64),
	}
	if r.open {
		m.uncorrected = newHistogram()
	}
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		m.corrected.Merge(s.corrected)
		m.sumCorr += s.sumCorr
		m.maxCorr = max(m.maxCorr, s.maxCorr)
		if r.open {
			m.uncorrected.Merge(s.uncorrected)
			m.sumUnc += s.sumUnc
			m.maxUnc = max(m.maxUnc, s.maxUnc)
		}
		m.requests += s.requests
		m.successes += s.successes
		for code, n := range s.status {
			if n > 0 {
				m.status[code] += n
			}
		}
		for code, n := range s.otherStatus {
			m.status[code] += n
		}
		for k, n := range s.errs {
			if n > 0 {
				m.errs[errorKinds[k]] += n
			}
		}
		m.lastEnd = max(m.lastEnd, s.lastEnd)
		s.mu.Unlock()
	}
	if !r.open {
		m.uncorrected = m.corrected
		m.sumUnc, m.maxUnc = m.sumCorr, m.maxCorr
	}
	return m
}
