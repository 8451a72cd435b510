package loadgen

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/highload-lab/hlab/internal/cpuuse"
)

// Run sends load to url until the duration or request count is reached, or
// ctx is done, and returns what it measured. It returns an error only when
// the options are invalid (one of the Err* sentinels of this package, wrapped
// with the offending value); a failing target shows up in Result.Errors and
// Result.StatusCodes instead. When ctx is done Run stops sending, abandons
// the requests in flight (they are not counted) and returns the figures so
// far with Result.Interrupted set.
func Run(ctx context.Context, url string, opts ...Option) (*Result, error) {
	c, err := newCfg(url, opts)
	if err != nil {
		return nil, err
	}
	r := &runner{c: c, url: url, tracker: newConnTracker(), stopCh: make(chan struct{})}
	return r.run(ctx), nil
}

type runner struct {
	c         *cfg
	url       string
	tlsConfig *tls.Config // https only
	tracker   *connTracker
	rec       *recorder
	start     time.Time
	cpu       cpuuse.Meter // the process's CPU use over the run
	cpuUse    cpuuse.Usage

	// stopped: send nothing more. aborted: ctx is done; connections are
	// being closed under the requests in flight, whose results are dropped.
	stopped  atomic.Bool
	aborted  atomic.Bool
	stopCh   chan struct{}
	stopOnce sync.Once
	stopAt   time.Duration // offset of the stop; written once in stop
	sleeper  sleeper       // open model: the dispatcher's; woken by stop

	workers sync.WaitGroup
	issued  atomic.Int64 // closed model: requests claimed by workers

	// Open model.
	late       atomic.Int64
	maxLag     atomic.Int64 // nanoseconds
	dispatched uint64       // written by the dispatcher only
	unsent     uint64
}

func (r *runner) stop() {
	r.stopOnce.Do(func() {
		r.stopAt = time.Since(r.start)
		r.stopped.Store(true)
		close(r.stopCh)
		if r.sleeper != nil {
			r.sleeper.wake()
		}
	})
}

func (r *runner) run(ctx context.Context) *Result {
	c := r.c
	r.tlsConfig = clientTLS(c)

	if c.open {
		r.sleeper = newSleeper()
		defer r.sleeper.close()
	}
	// Allocate the histograms before the clock starts: it takes a few
	// milliseconds the first sends would otherwise start late by.
	r.rec = newRecorder(c.open, c.conns)
	r.cpu = cpuuse.Start()
	r.start = time.Now()
	if c.durSet {
		t := time.AfterFunc(c.duration, r.stop)
		defer t.Stop()
	}

	done := make(chan struct{})
	var helpers sync.WaitGroup
	helpers.Go(func() {
		select {
		case <-ctx.Done():
			r.aborted.Store(true)
			r.stop()
			r.tracker.closeAll()
		case <-done:
		}
	})
	if c.onProgress != nil {
		helpers.Go(func() {
			t := time.NewTicker(progressInterval)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					c.onProgress(r.progress())
				case <-done:
					return
				}
			}
		})
	}

	if c.open {
		r.runOpen()
	} else {
		r.runClosed()
	}
	r.stop() // records when sending ended, for a count-bound run
	r.cpuUse = r.cpu.Stop()
	close(done)
	helpers.Wait()
	// Workers closed their connections; this closes whatever remains
	// (nothing, unless ctx aborted).
	r.tracker.closeAll()

	res := r.result()
	if c.onProgress != nil {
		c.onProgress(r.progress())
	}
	return res
}

func (r *runner) progress() Progress {
	p := Progress{Elapsed: time.Since(r.start)}
	if r.c.durSet {
		p.Total = r.c.duration
	}
	if r.c.reqSet {
		p.Target = r.c.requests
	}
	p.Requests, p.Errors = r.rec.counts()
	return p
}

func (r *runner) newRequest() *fasthttp.Request {
	req := fasthttp.AcquireRequest()
	// Send header names as the user wrote them.
	req.Header.DisableNormalizing()
	req.SetRequestURI(r.url)
	req.URI().DisablePathNormalizing = true
	req.Header.SetMethod(r.c.method)
	r.addHeaders(req)
	if r.c.body != nil {
		req.SetBodyRaw(r.c.body) // shared read-only by all workers
	}
	return req
}

// addHeaders adds the Header options to req, and a User-Agent when they
// have none.
func (r *runner) addHeaders(req *fasthttp.Request) {
	for _, h := range r.c.headers {
		if strings.EqualFold(h.key, "Host") {
			req.Header.SetHost(h.value)
			req.UseHostHeader = true
			continue
		}
		req.Header.Add(h.key, h.value)
	}
	if len(req.Header.UserAgent()) == 0 {
		req.Header.SetUserAgent(userAgent)
	}
}

// do sends one request on cl and records it. intended and sent are offsets
// from the start; intended == sent in the closed model. The timeout becomes
// a deadline on the connection, so a timed-out request frees its worker and
// its connection at once. Times are read from the monotonic clock only
// (time.Since of a monotonic start), once when sent and once when done.
func (r *runner) do(sh *shard, cl *client, req *fasthttp.Request, resp *fasthttp.Response, intended, sent time.Duration) error {
	err := cl.do(req, resp, r.start.Add(sent+r.c.timeout))
	end := time.Since(r.start)
	if err != nil && r.aborted.Load() {
		return err // killed by us, not by the target
	}
	status := 0
	if err == nil {
		status = resp.StatusCode()
	}
	sh.record(intended, sent, end, status, err)
	return err
}

// runClosed runs the closed model: each worker sends its next request when
// the previous one is answered.
func (r *runner) runClosed() {
	if r.runEngines() {
		return
	}
	for id := range r.c.conns {
		r.workers.Go(func() { r.closedWorker(id) })
	}
	r.workers.Wait()
}

// worker is what one goroutine of either model sends with: its request
// and response, its connection, its shard of the counters and, in a
// scenario, its VU.
type worker struct {
	r      *runner
	req    *fasthttp.Request
	resp   *fasthttp.Response
	cl     *client
	sh     *shard
	script *scripted // nil without a scenario
}

func (r *runner) newWorker(id int) *worker {
	return &worker{r: r, req: r.newRequest(), resp: fasthttp.AcquireResponse(), cl: r.newClient(),
		sh: r.rec.shardFor(id), script: r.newScripted(id)}
}

// close closes the worker's connection and releases its request and
// response.
func (w *worker) close() {
	w.cl.close()
	fasthttp.ReleaseResponse(w.resp)
	fasthttp.ReleaseRequest(w.req)
}

// fill asks the VU for its next request, in a scenario; it reports
// whether it did (the send time is then read after it).
func (w *worker) fill() bool {
	if w.script == nil {
		return false
	}
	w.r.fill(w.script, w.req)
	return true
}

// send sends the request, records it and, in a scenario, hands the answer
// to the VU.
func (w *worker) send(intended, sent time.Duration) {
	err := w.r.do(w.sh, w.cl, w.req, w.resp, intended, sent)
	if w.script != nil {
		w.script.answer(w.resp, err)
	}
}

func (r *runner) closedWorker(id int) {
	w := r.newWorker(id)
	defer w.close()
	for !r.stopped.Load() {
		sent := time.Since(r.start)
		if r.c.durSet && sent >= r.c.duration {
			return
		}
		if r.c.reqSet && r.issued.Add(1) > r.c.requests {
			return
		}
		if w.fill() {
			sent = time.Since(r.start)
		}
		w.send(sent, sent)
	}
}

// runOpen runs the open model, on the event loop where it can (see
// engine_open_linux.go) and on the dispatcher and its workers elsewhere,
// then counts the intended sends that never went out.
func (r *runner) runOpen() {
	if !r.runEngines() {
		r.dispatch()
	}
	// Intended sends that came due before sending stopped but never went out.
	r.stop()
	end := r.stopAt
	if r.c.durSet {
		end = min(end, r.c.duration)
	}
	due := dueBefore(r.c.pacer, end)
	if r.c.reqSet {
		due = min(due, uint64(r.c.requests))
	}
	if due > r.dispatched {
		r.unsent = due - r.dispatched
	}
	r.workers.Wait()
}

// intendedAt returns the intended send time of request n (counted from
// 0), as an offset from the start, and false when the run sends no n-th
// request.
func (r *runner) intendedAt(n uint64) (time.Duration, bool) {
	if r.c.reqSet && n >= uint64(r.c.requests) {
		return 0, false
	}
	at := r.c.pacer.At(n)
	return at, !r.c.durSet || at < r.c.duration
}

// sentLate records a send lag behind its intended time: counted as late
// past lateThreshold, and kept when it is the largest so far.
func (r *runner) sentLate(lag time.Duration) {
	if lag > lateThreshold {
		r.late.Add(1)
	}
	for {
		old := r.maxLag.Load()
		if int64(lag) <= old || r.maxLag.CompareAndSwap(old, int64(lag)) {
			return
		}
	}
}

// dispatch runs the open model on goroutines: it walks the pacer's intended
// send times and hands each to an idle worker, starting workers on demand
// up to the connection cap. When all are busy it waits for one; the sends
// it then makes are late, and their latency counts from the intended time.
// runOpen counts what went unsent and waits for the workers.
func (r *runner) dispatch() {
	jobs := make(chan time.Duration) // intended offsets from start
	workers := 0

dispatch:
	for n := uint64(0); ; n++ {
		at, ok := r.intendedAt(n)
		if !ok {
			break
		}
		if !r.sleeper.sleepUntil(r.start.Add(at)) || r.stopped.Load() {
			break
		}
		select {
		case jobs <- at:
		default:
			if workers < r.c.conns {
				id := workers
				workers++
				r.workers.Go(func() { r.openWorker(id, at, jobs) })
				break
			}
			select {
			case jobs <- at:
			case <-r.stopCh:
				break dispatch
			}
		}
		r.dispatched = n + 1
	}
	close(jobs)
}

func (r *runner) openWorker(id int, at time.Duration, jobs <-chan time.Duration) {
	w := r.newWorker(id)
	defer w.close()
	for {
		w.fill()
		sent := time.Since(r.start)
		r.sentLate(sent - at)
		w.send(at, sent)
		var ok bool
		if at, ok = <-jobs; !ok {
			return
		}
	}
}

func (r *runner) result() *Result {
	c := r.c
	m := r.rec.merge()
	res := &Result{
		Model:       "closed",
		URL:         r.url,
		Method:      c.method,
		Connections: c.conns,
		Requests:    m.requests,
		Successes:   m.successes,
		StatusCodes: m.status,
		Errors:      m.errs,
		Interrupted: r.aborted.Load(),
		corrected:   m.corrected,
		uncorrected: m.uncorrected,
	}
	res.BytesIn, res.BytesOut = r.tracker.bytes()
	if u := r.cpuUse; u.Measured {
		res.Generator = Generator{CPU: u.CPUs, CPUsAvailable: u.Available, Saturated: u.Saturated()}
	}
	res.Duration = m.lastEnd
	if m.requests == 0 {
		res.Duration = r.stopAt
	}
	if c.open {
		res.Model = "open"
		res.Rate = c.rate
		if res.Rate == 0 && r.stopAt > 0 {
			res.Rate = float64(r.dispatched+r.unsent) / r.stopAt.Seconds()
		}
		res.Missed = Missed{
			Late:   r.late.Load(),
			Unsent: int64(r.unsent),
			MaxLag: time.Duration(r.maxLag.Load()),
		}
	}
	if s := res.Duration.Seconds(); s > 0 {
		res.RPS = float64(res.Requests) / s
		res.Throughput = float64(res.Successes) / s
	}
	if res.Requests > 0 {
		res.SuccessRatio = float64(res.Successes) / float64(res.Requests)
	}
	res.Latency = latencies(m.corrected, m.sumCorr, m.maxCorr)
	res.LatencyUncorrected = latencies(m.uncorrected, m.sumUnc, m.maxUnc)
	return res
}
