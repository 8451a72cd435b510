package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// job is a push notification to send: a task change of one user, for all
// their devices.
type job struct {
	uid int64
	ev  Event
	at  time.Time // enqueued
	id  int64     // the outbox row's id (Config.NotifyOutbox), else 0
}

// Notification is one task change to push to a user's devices, as a push
// provider's multicast call takes it.
type Notification struct {
	// ID is, with Config.NotifyOutbox, the notification's outbox id: the
	// same on every delivery of one notification, so that a receiver can
	// drop the duplicates that at-least-once delivery may send. Without
	// the outbox, nothing is sent twice and it is left out.
	ID      int64    `json:"id,omitempty"`
	UserID  int64    `json:"user_id"`
	Devices []Device `json:"devices"`
	Event   Event    `json:"event"`
}

// Batch is what the webhook receives (POST, JSON): the notifications of
// up to maxBatch task changes, of one or several users, in one call, as
// push relays take them (Expo's push API takes 100 at once). Batching
// makes the cost of notifications grow with the number of calls, which
// is bounded by the workers, not with the number of changes. A body
// holds at most Config.NotifyMaxBatchBytes (but for a single
// notification over it, which goes alone).
type Batch struct {
	Notifications []Notification `json:"notifications"`
}

// notifier delivers push notifications to the webhook: report C's
// optimization 7, a bounded in-memory queue with n workers. When the
// queue is full a job is dropped and counted; a request never waits for
// it. A worker takes the jobs that arrive within batchWindow (up to
// maxBatch), finds their users' devices in one query and posts them in
// one call. With Deopt.GoroutinePerJob every job gets its own goroutine,
// query and call instead, and nothing bounds them.
type notifier struct {
	url       string
	label     string // url without what may be secret in it, for logs
	secret    []byte // signs each call (SignatureHeader); nil: unsigned
	maxBytes  int    // Config.NotifyMaxBatchBytes
	client    *http.Client
	timeout   time.Duration
	retries   int
	backoff   time.Duration
	perJob    bool
	devicesOf func(ctx context.Context, uids []int64) (map[int64][]Device, error)
	log       *slog.Logger

	queue   chan job
	workers int
	// collecting is held by the worker gathering the next batch, so that
	// batches fill while the other workers deliver.
	collecting sync.Mutex
	// mu orders enqueue before stop: nothing is handed over once closed.
	mu     sync.RWMutex
	closed bool
	ctx    context.Context // canceled when the drain deadline passes
	cancel context.CancelFunc
	quit   chan struct{}
	wg     sync.WaitGroup

	inflight prometheus.Gauge
	results  *prometheus.CounterVec
	attempts prometheus.Counter
	latency  prometheus.Histogram
}

// Job results counted by tasks_notify_jobs_total.
const (
	jobEnqueued  = "enqueued"
	jobDropped   = "dropped" // the queue was full, or the service stopping
	jobDelivered = "delivered"
	jobFailed    = "failed" // every attempt failed, or the webhook refused it (4xx)
	jobNoDevices = "no_devices"
)

func newNotifier(cfg *Config, devicesOf func(context.Context, []int64) (map[int64][]Device, error), reg prometheus.Registerer, log *slog.Logger) *notifier {
	n := &notifier{
		url: cfg.WebhookURL, label: webhookLabel(cfg.WebhookURL), maxBytes: cfg.NotifyMaxBatchBytes, secret: []byte(cfg.WebhookSecret),
		timeout: cfg.NotifyTimeout, retries: cfg.NotifyRetries, backoff: cfg.NotifyBackoff,
		perJob: cfg.Deopt.GoroutinePerJob, devicesOf: devicesOf, log: log,
		workers: cfg.Workers, quit: make(chan struct{}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tasks_notify_inflight", Help: "Notification jobs being delivered now (busy workers, or goroutines with --worker-queue=false)."}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tasks_notify_jobs_total", Help: "Notification jobs by result: enqueued, dropped (queue full), delivered, failed, no_devices.",
		}, []string{"result"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{Name: "tasks_notify_attempts_total", Help: "Webhook calls made, retries included."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tasks_notify_delay_seconds", Help: "From a change to its notification's delivery.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	// One idle connection per worker, so workers reuse their connections.
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: cfg.NotifyTimeout}).DialContext,
		MaxIdleConnsPerHost:   cfg.Workers,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.NotifyTimeout,
	}
	// No redirect is followed: a 307 or 308 would re-post every user's
	// push tokens wherever it points.
	n.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, r := range []string{jobEnqueued, jobDropped, jobDelivered, jobFailed, jobNoDevices} {
		n.results.WithLabelValues(r)
	}
	reg.MustRegister(n.inflight, n.results, n.attempts, n.latency)
	if !n.perJob && n.url != "" && !cfg.NotifyOutbox {
		n.queue = make(chan job, cfg.QueueSize)
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tasks_notify_queue_depth", Help: "Notification jobs waiting for a worker."},
				func() float64 { return float64(len(n.queue)) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tasks_notify_queue_capacity", Help: "Notification jobs the queue holds at most."},
				func() float64 { return float64(cap(n.queue)) }),
		)
		for range n.workers {
			n.wg.Go(n.work)
		}
	}
	return n
}

// enqueue hands j over without blocking; with no webhook it does nothing.
func (n *notifier) enqueue(j job) {
	if n.url == "" {
		return
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		n.results.WithLabelValues(jobDropped).Inc()
		return
	}
	if n.perJob {
		n.results.WithLabelValues(jobEnqueued).Inc()
		n.wg.Go(func() { n.deliver([]job{j}) })
		return
	}
	select {
	case n.queue <- j:
		n.results.WithLabelValues(jobEnqueued).Inc()
	default:
		n.results.WithLabelValues(jobDropped).Inc()
	}
}

// maxBatch is how many jobs a worker delivers at once, and batchWindow
// how long it waits for more after the first: at 1,000 changes a second
// a batch holds about 10. Push notifications can wait 10 ms.
const (
	maxBatch    = 64
	batchWindow = 10 * time.Millisecond
)

func (n *notifier) work() {
	batch := make([]job, 0, maxBatch)
	for {
		var open bool
		batch, open = n.collect(batch[:0])
		if len(batch) > 0 {
			n.deliver(batch)
		}
		if !open {
			for { // drain what is queued, until the deadline cancels n.ctx
				batch = n.take(batch[:0])
				if len(batch) == 0 {
					return
				}
				n.deliver(batch)
			}
		}
	}
}

// collect waits for a job, then appends those that arrive within
// batchWindow, up to maxBatch. open is false once stop was called.
func (n *notifier) collect(batch []job) (_ []job, open bool) {
	n.collecting.Lock()
	defer n.collecting.Unlock()
	select {
	case j := <-n.queue:
		batch = append(batch, j)
	case <-n.quit:
		return batch, false
	}
	window := time.NewTimer(batchWindow)
	defer window.Stop()
	for len(batch) < maxBatch {
		select {
		case j := <-n.queue:
			batch = append(batch, j)
		case <-window.C:
			return batch, true
		case <-n.quit:
			return batch, false
		}
	}
	return batch, true
}

// take appends the jobs waiting in the queue to batch, up to maxBatch,
// without waiting for more.
func (n *notifier) take(batch []job) []job {
	for len(batch) < maxBatch {
		select {
		case j := <-n.queue:
			batch = append(batch, j)
		default:
			return batch
		}
	}
	return batch
}

// deliver pushes jobs, the webhook call retried in place (n.send), and
// counts what became of each.
func (n *notifier) deliver(jobs []job) {
	n.inflight.Add(float64(len(jobs)))
	defer n.inflight.Sub(float64(len(jobs)))
	for _, err := range n.push(n.ctx, jobs, n.send) {
		switch {
		case err == nil:
			n.results.WithLabelValues(jobDelivered).Inc()
		case errors.Is(err, errNoDevices):
			n.results.WithLabelValues(jobNoDevices).Inc()
		default:
			n.results.WithLabelValues(jobFailed).Inc()
		}
	}
}

// errNoDevices is a job's result when its user has no device to notify.
var errNoDevices = errors.New("the user has no devices")

// push looks up the devices of the jobs' users and posts the
// notifications of those who have devices, in as few calls as maxBytes
// allows, each call made by send. Both delivery paths share it: the
// in-memory queue's send retries in place, the outbox's makes one
// attempt and keeps the retries in its rows. It returns each job's
// result, in the jobs' order: nil once the webhook took it, errNoDevices,
// or why it failed (retryable when another attempt may succeed). ctx
// bounds the whole push.
func (n *notifier) push(ctx context.Context, jobs []job, send func(ctx context.Context, body []byte) error) []error {
	errs := make([]error, len(jobs))
	uids := make([]int64, 0, len(jobs))
	for _, j := range jobs {
		if !slices.Contains(uids, j.uid) {
			uids = append(uids, j.uid)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, n.timeout)
	devs, err := n.devicesOf(dctx, uids)
	cancel()
	if err != nil {
		n.log.Warn("notification: cannot find the users' devices", "users", len(uids), "jobs", len(jobs), "err", err)
		err = retryable{fmt.Errorf("finding the users' devices: %w", err)}
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	parts := make([]part, 0, len(jobs))
	for i, j := range jobs {
		if len(devs[j.uid]) == 0 {
			errs[i] = errNoDevices
			continue
		}
		b, err := json.Marshal(Notification{ID: j.id, UserID: j.uid, Devices: devs[j.uid], Event: j.ev})
		if err != nil {
			errs[i] = err
			continue
		}
		parts = append(parts, part{job: j, index: i, json: b})
	}
	for len(parts) > 0 {
		k := fitting(parts, n.maxBytes)
		n.post(ctx, parts[:k], send, errs)
		parts = parts[k:]
	}
	return errs
}

// part is one job's notification, encoded.
type part struct {
	job   job
	index int // in the jobs push was given
	json  []byte
}

// batchEnvelope is the bytes of a Batch around its notifications:
// {"notifications":[...]}.
const batchEnvelope = len(`{"notifications":[]}`)

// fitting returns how many of parts, from the first, fit in a body of
// maxBytes: at least one.
func fitting(parts []part, maxBytes int) int {
	size := batchEnvelope + len(parts[0].json)
	k := 1
	for k < len(parts) && size+1+len(parts[k].json) <= maxBytes {
		size += 1 + len(parts[k].json)
		k++
	}
	return k
}

// body is the Batch of parts, as the webhook receives it.
func body(parts []part) []byte {
	size := batchEnvelope + len(parts) - 1
	for _, p := range parts {
		size += len(p.json)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"notifications":[`...)
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p.json...)
	}
	return append(b, "]}"...)
}

// post delivers parts in one call and sets their results in errs. A
// call the webhook refuses as too large (413) is split in halves, each
// posted on its own, so that the notification it cannot take fails
// alone, not the others of its batch.
func (n *notifier) post(ctx context.Context, parts []part, send func(context.Context, []byte) error, errs []error) {
	err := send(ctx, body(parts))
	if errors.Is(err, errTooLarge) && len(parts) > 1 {
		half := len(parts) / 2
		n.post(ctx, parts[:half], send, errs)
		n.post(ctx, parts[half:], send, errs)
		return
	}
	for _, p := range parts {
		errs[p.index] = err
	}
	if err != nil {
		n.log.Warn("notifications failed", "webhook", n.label, "notifications", len(parts), "first_user", parts[0].job.uid, "retryable", isRetryable(err), "err", err)
		return
	}
	now := time.Now()
	for _, p := range parts {
		n.latency.Observe(now.Sub(p.job.at).Seconds())
	}
}

// retryable is a failure that another attempt may get past: a transport
// error, a 429 or 5xx, a database that did not answer.
type retryable struct{ error }

func (r retryable) Unwrap() error { return r.error }

func isRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

// errTooLarge is the webhook's 413: the body was over what it takes.
var errTooLarge = errors.New("webhook answered 413: the body is larger than it takes")

// send posts body, with a timeout per attempt and retries with
// exponential backoff and jitter on transport errors, 429 and 5xx.
func (n *notifier) send(ctx context.Context, body []byte) error {
	wait := n.backoff
	for attempt := 0; ; attempt++ {
		err := n.call(ctx, body)
		if err == nil {
			return nil
		}
		if !isRetryable(err) || attempt >= n.retries {
			return fmt.Errorf("after %d attempts: %w", attempt+1, err)
		}
		d := wait/2 + rand.N(wait) // jitter, so retries of many batches spread out
		wait *= 2
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return fmt.Errorf("stopped while retrying: %w", err)
		}
	}
}

// call makes one webhook call; its error is retryable when another
// attempt may succeed.
func (n *notifier) call(ctx context.Context, body []byte) error {
	n.attempts.Inc()
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if len(n.secret) > 0 {
		req.Header.Set(SignatureHeader, SignWebhook(n.secret, time.Now(), body))
	}
	resp, err := n.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = n.label // the URL's query or user info may hold a token
		}
		return retryable{err}
	}
	// Read a little of the body so the connection can be reused.
	var buf [512]byte
	resp.Body.Read(buf[:])
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusTooManyRequests || c >= 500:
		return retryable{fmt.Errorf("webhook answered %s", resp.Status)}
	case c == http.StatusRequestEntityTooLarge:
		return errTooLarge
	case c >= 300 && c < 400:
		return fmt.Errorf("webhook answered %s: redirects are not followed (they would send every user's push tokens where they point): give --webhook-url the final address", resp.Status)
	default:
		return fmt.Errorf("webhook refused the notification: %s", resp.Status)
	}
}

// stop stops taking jobs and delivers those queued or running until ctx
// ends; then it cancels what is left.
func (n *notifier) stop(ctx context.Context) error {
	n.mu.Lock()
	was := n.closed
	n.closed = true
	n.mu.Unlock()
	if was {
		return nil
	}
	close(n.quit)
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	defer n.client.CloseIdleConnections()
	select {
	case <-done:
		n.cancel()
		return nil
	case <-ctx.Done():
		n.cancel()
		<-done
		return fmt.Errorf("tasks: notifications still being delivered at shutdown were abandoned: %w", ctx.Err())
	}
}
