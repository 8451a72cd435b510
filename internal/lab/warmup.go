package lab

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
)

// steady bounds a warm-up that waits for throughput to stop climbing:
// load in windows of window, until at least min has passed, minRequests
// were answered and two windows in a row failed to beat the best earlier
// one by 10%, or max. The request floor is for the JIT: the JVM compiles
// a method to its top tier after ~10-15k calls, and on a throttled core
// its compiler competes with the requests, so on a busy machine
// throughput can stall for a window or two before it climbs again.
type steady struct {
	window, min, max time.Duration
	minRequests      int64
}

func (o Options) steady() steady {
	if o.Short {
		return steady{window: shortRun, max: 4 * shortRun}
	}
	if o.Mode == Full {
		return steady{window: 5 * time.Second, min: 30 * time.Second, max: 3 * time.Minute, minRequests: 100_000}
	}
	return steady{window: 3 * time.Second, min: 9 * time.Second, max: time.Minute, minRequests: 30_000}
}

// WarmUp warms the measurements up (warming is not measured), each as
// its Steady field says, and records each one's rate for the length of
// its runs and what its warm-up found in its row's note. The measuring
// methods then skip their warm-up. Steady warm-ups run at once: on a
// machine with few cores, warming several JVMs together costs less time
// than one after another. The others run one after another, so that each
// one's rate, which sets how long its runs last, is its own.
func (r *Run) WarmUp(ctx context.Context, ms ...Measurement) error {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
	)
	for _, m := range ms {
		if !m.Steady {
			continue
		}
		wg.Go(func() {
			if _, err := r.warmOne(ctx, m); err != nil {
				mu.Lock()
				first = cmpErr(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	for _, m := range ms {
		if m.Steady {
			continue
		}
		if _, err := r.warmOne(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// warmOne warms m up and returns its rate (successful requests per second
// of the last window).
func (r *Run) warmOne(ctx context.Context, m Measurement) (float64, error) {
	drive := func(d time.Duration) (*Sample, error) {
		s, err := m.Driver.Drive(ctx, d, func(bool) {})
		if err != nil {
			return nil, fmt.Errorf("lab: %s warm-up: %w", r.Label(m.Key), err)
		}
		return s, nil
	}
	if !m.Steady {
		r.Progress.Step(r.Label(m.Key)+": warm-up", r.Opts.Warmup())
		s, err := drive(r.Opts.Warmup())
		if err != nil {
			return 0, err
		}
		r.setWarm(m.Key, s.Goodput(), "")
		return s.Goodput(), nil
	}
	w := r.Opts.steady()
	r.Progress.Step(fmt.Sprintf("%s: warm-up until throughput stops climbing (%v windows, at most %v)", r.Label(m.Key), w.window, w.max), w.min)
	start := time.Now()
	var (
		rates []float64
		sent  int64
		flat  int
		best  float64
	)
	settled := false
	for time.Since(start) < w.max && ctx.Err() == nil {
		s, err := drive(w.window)
		if err != nil {
			return 0, err
		}
		rate := s.Goodput()
		rates = append(rates, rate)
		sent += s.Successes
		if rate < 1.1*best {
			flat++
		} else {
			flat = 0
		}
		best = max(best, rate)
		if flat >= 2 && sent >= w.minRequests && time.Since(start) >= w.min {
			settled = true
			break
		}
	}
	parts := make([]string, len(rates))
	for i, v := range rates {
		parts[i] = strconv.FormatFloat(v, 'f', 0, 64)
	}
	note := fmt.Sprintf("warm-up until throughput stopped climbing: settled after %.0f s, %d requests (req/s per %v window: %s)",
		time.Since(start).Seconds(), sent, w.window, strings.Join(parts, " "))
	if !settled {
		note = fmt.Sprintf("warm-up: throughput NEVER SETTLED within %v (%d requests; req/s per %v window: %s): the runs may still measure a warming JIT",
			w.max, sent, w.window, strings.Join(parts, " "))
		r.Progress.Logf("%s: %s", r.Label(m.Key), note)
	}
	last := 0.0
	if len(rates) > 0 {
		last = rates[len(rates)-1]
	}
	r.setWarm(m.Key, last, note)
	return last, nil
}

func (r *Run) setWarm(key labresult.Key, rate float64, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warmRate == nil {
		r.warmRate, r.warmNote = map[labresult.Key]float64{}, map[labresult.Key]string{}
	}
	r.warmRate[key] = rate
	if note != "" {
		r.warmNote[key] = note
		var all []string
		for k, n := range r.warmNote {
			all = append(all, r.Label(k)+": "+n)
		}
		sort.Strings(all)
		r.res.Env["warmup"] = strings.Join(all, "; ")
	}
}
