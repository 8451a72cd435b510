package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// outbox delivers notifications that survive a crash (Config.NotifyOutbox):
// its recorder writes each to notify_outbox in the transaction of the
// change that causes it (store.change), and its workers claim due rows,
// push them as the in-memory queue does (notifier.push: one devices
// query and one webhook call per batch, signed, bounded in bytes), and
// delete them only once the webhook answered 2xx. A failed attempt is
// rescheduled with backoff; a row out of attempts, or one the webhook
// refuses (4xx), is kept as failed and counted, never dropped. Delivery
// is at least once: a worker that dies after the webhook took a batch
// but before deleting it leaves rows that are delivered again.
//
// Claims are leases, not transactions held across the webhook call: a
// claim is one short statement that pushes the rows' next_attempt_at
// past the lease, and a second short one deletes or reschedules them
// after the call. A transaction held through the call would keep a pool
// connection per busy worker away from the API's requests (eight workers
// on a pool of sixteen) and hold back vacuum on every table for as long
// as a webhook is slow. A lease is several webhook timeouts long
// (outboxLease), and a batch's calls end a timeout before it does, so
// that while a process lives no other worker claims the rows it is
// delivering; when it dies, its rows come due as its leases end.
//
// Workers are woken at once by this process's own changes (wake, after
// commit) and poll every NotifyOutboxPoll for the rows of other
// instances and of a process that crashed. LISTEN/NOTIFY would wake
// every instance instead, but each NOTIFY takes a lock that serializes
// the commits of every notifying transaction in the database: a cost on
// every write, to save a poll a second.
type outbox struct {
	n        *notifier // pushes batches; owns the workers' lifecycle (quit, wg, ctx)
	store    *store
	log      *slog.Logger
	workers  int
	retries  int // rescheduled attempts after the first
	backoff  time.Duration
	lease    time.Duration
	poll     time.Duration
	wakeup   chan struct{}
	recount  chan struct{} // asks statsLoop for a refresh now
	pending  prometheus.Gauge
	failed   prometheus.Gauge
	oldest   prometheus.Gauge
	statsErr prometheus.Counter
}

// outboxLease is how long a claim holds its rows: a batch makes one
// devices query and usually one webhook call, each bounded by the
// timeout; five of them leave room for a batch split in several calls
// (NotifyMaxBatchBytes, a 413).
func outboxLease(timeout time.Duration) time.Duration { return 5 * timeout }

// Outbox bounds: the most a backoff grows to, and how often the depth
// gauges are refreshed (a count over the table's rows) at least and at
// most.
const (
	outboxMaxBackoff  = time.Minute
	outboxStatsEvery  = 5 * time.Second
	outboxStatsMinGap = time.Second
)

// Job result counted by tasks_notify_jobs_total with the outbox: an
// attempt failed and the row was rescheduled.
const jobRetried = "retried"

func newOutbox(cfg *Config, n *notifier, st *store, reg prometheus.Registerer, log *slog.Logger) *outbox {
	o := &outbox{
		n: n, store: st, log: log, workers: cfg.Workers, retries: cfg.NotifyOutboxRetries,
		backoff: cfg.NotifyBackoff, lease: outboxLease(cfg.NotifyTimeout), poll: cfg.NotifyOutboxPoll,
		wakeup: make(chan struct{}, 1), recount: make(chan struct{}, 1),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tasks_notify_outbox_pending",
			Help: "Notifications in the outbox table waiting for delivery or being delivered, every instance's (each instance reports the same table: take the max)."}),
		failed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tasks_notify_outbox_failed",
			Help: "Notifications kept as failed in the outbox table after their retries, or refused by the webhook; they stay until an operator requeues or deletes them."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tasks_notify_outbox_oldest_seconds",
			Help: "Age of the oldest notification waiting in the outbox (0: none): grows when delivery stalls."}),
		statsErr: prometheus.NewCounter(prometheus.CounterOpts{Name: "tasks_notify_outbox_stats_errors_total",
			Help: "Refreshes of the outbox gauges that failed (the gauges keep their last values)."}),
	}
	n.results.WithLabelValues(jobRetried)
	reg.MustRegister(o.pending, o.failed, o.oldest, o.statsErr)
	st.recorders = append(st.recorders, o)
	n.wg.Go(o.claimLoop)
	n.wg.Go(o.statsLoop)
	return o
}

// record writes ev's notification in the change's transaction.
func (o *outbox) record(ctx context.Context, q dbtx, uid int64, ev *Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO notify_outbox (user_id, event) VALUES ($1, $2)`, uid, b)
	return err
}

// wake tells the workers, after a change committed, that a row is due.
func (o *outbox) wake() {
	o.n.results.WithLabelValues(jobEnqueued).Inc()
	o.nudge()
}

// nudge makes idle workers claim now rather than at the next poll.
func (o *outbox) nudge() {
	select {
	case o.wakeup <- struct{}{}:
	default:
	}
}

// claimed is an outbox row being delivered.
type claimed struct {
	id       int64
	attempts int // this one included
	// unreadable is why its event could not be decoded (a row written by
	// another version): it is kept as failed, not claimed forever.
	unreadable error
}

// claimLoop claims a batch whenever a worker is free and hands it to a
// goroutine of its own; with nothing due it waits for a wake-up or the
// poll. Claims never get ahead of the workers, so no lease runs out
// while its rows wait in memory.
func (o *outbox) claimLoop() {
	free := make(chan struct{}, o.workers)
	poll := time.NewTicker(o.poll)
	defer poll.Stop()
	for {
		select {
		case free <- struct{}{}:
		case <-o.n.quit:
			return
		}
		claimedAt := time.Now() // no later than the lease's start
		rows, jobs, err := o.claim()
		if err != nil {
			o.log.Warn("notification outbox: cannot claim rows", "err", err)
		}
		if len(jobs) > 0 {
			o.n.wg.Go(func() {
				defer func() { <-free }()
				o.deliver(claimedAt, rows, jobs)
			})
			continue
		}
		<-free
		select {
		case <-o.wakeup:
			// Let the changes committing with this one join its batch.
			select {
			case <-time.After(batchWindow):
			case <-o.n.quit:
				return
			}
		case <-poll.C:
		case <-o.n.quit:
			return
		}
	}
}

// claim leases up to maxBatch due rows: SKIP LOCKED lets the claims of
// other workers and instances pass each other instead of queueing on the
// same rows.
func (o *outbox) claim() ([]claimed, []job, error) {
	ctx, cancel := context.WithTimeout(o.n.ctx, o.n.timeout)
	defer cancel()
	var rows []claimed
	var jobs []job
	err := o.store.read(ctx, func(q dbtx) error {
		// The CTE runs once: its LIMIT and locks apply to one pick.
		rs, err := q.Query(ctx, `WITH due AS (
				SELECT id FROM notify_outbox WHERE failed_at IS NULL AND next_attempt_at <= now()
				ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
			UPDATE notify_outbox o SET attempts = o.attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
			FROM due WHERE o.id = due.id
			RETURNING o.id, o.attempts, o.user_id, o.event, o.created_at`, maxBatch, o.lease.Seconds())
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r claimed
			var j job
			var ev []byte
			if err := rs.Scan(&r.id, &r.attempts, &j.uid, &ev, &j.at); err != nil {
				return err
			}
			j.id = r.id
			if err := json.Unmarshal(ev, &j.ev); err != nil {
				r.unreadable = fmt.Errorf("the event cannot be read: %w", err)
			}
			rows, jobs = append(rows, r), append(jobs, j)
		}
		return rs.Err()
	})
	if err != nil {
		return nil, nil, err
	}
	return rows, jobs, nil
}

// deliver pushes one claimed batch with one attempt per call, then
// deletes the rows the webhook took (or whose user has no devices) and
// reschedules or fails the others.
func (o *outbox) deliver(claimedAt time.Time, rows []claimed, jobs []job) {
	o.n.inflight.Add(float64(len(jobs)))
	defer o.n.inflight.Sub(float64(len(jobs)))
	errs := make([]error, len(rows))
	var readable []job
	var at []int // readable's index in rows
	for i, r := range rows {
		if r.unreadable != nil {
			errs[i] = r.unreadable
			continue
		}
		readable, at = append(readable, jobs[i]), append(at, i)
	}
	if len(readable) > 0 {
		// No call outlives the lease, so that while this process lives
		// no other worker claims the rows it is still delivering.
		ctx, cancel := context.WithDeadline(o.n.ctx, claimedAt.Add(o.lease-o.n.timeout))
		for k, err := range o.n.push(ctx, readable, o.n.call) {
			errs[at[k]] = err
		}
		cancel()
	}
	var done []int64
	var again outboxUpdate
	var dead []int64
	soonest := outboxMaxBackoff
	for i, err := range errs {
		r := rows[i]
		switch {
		case err == nil:
			o.n.results.WithLabelValues(jobDelivered).Inc()
			done = append(done, r.id)
		case errors.Is(err, errNoDevices):
			o.n.results.WithLabelValues(jobNoDevices).Inc()
			done = append(done, r.id)
		case isRetryable(err) && r.attempts <= o.retries:
			o.n.results.WithLabelValues(jobRetried).Inc()
			wait := o.backoffAfter(r.attempts)
			soonest = min(soonest, wait)
			again.add(r, wait, false, err)
		default:
			o.n.results.WithLabelValues(jobFailed).Inc()
			again.add(r, 0, true, err)
			dead = append(dead, r.id)
		}
	}
	if len(dead) > 0 { // one line per batch: a webhook refusing everything would write one per row
		o.log.Warn("notifications kept as failed in the outbox", "outbox_ids", dead, "last_error", again.errs[len(again.errs)-1])
	}
	// The rows' fate is written even when the drain deadline canceled the
	// notifier: a delivered row left claimed would be delivered again.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.n.ctx), o.n.timeout)
	defer cancel()
	err := o.store.write(ctx, func(q dbtx) error {
		if len(done) > 0 {
			if _, err := q.Exec(ctx, `DELETE FROM notify_outbox WHERE id = ANY($1)`, done); err != nil {
				return err
			}
		}
		if len(again.ids) > 0 {
			// attempts matches only while the claim is this one: a row
			// whose lease ran out and was claimed again is the new claim's.
			_, err := q.Exec(ctx, `UPDATE notify_outbox o SET
					next_attempt_at = now() + make_interval(secs => u.wait),
					failed_at = CASE WHEN u.dead THEN now() END,
					last_error = u.err
				FROM unnest($1::bigint[], $2::int[], $3::float8[], $4::bool[], $5::text[]) AS u(id, attempts, wait, dead, err)
				WHERE o.id = u.id AND o.attempts = u.attempts`,
				again.ids, again.attempts, again.waits, again.dead, again.errs)
			return err
		}
		return nil
	})
	if err == nil && len(again.ids) > 0 && soonest < o.poll {
		time.AfterFunc(soonest, o.nudge) // a backoff shorter than the poll is kept
	}
	select { // the gauges show the batch's outcome soon
	case o.recount <- struct{}{}:
	default:
	}
	if err != nil {
		// The rows come due again when their lease ends.
		o.log.Warn("notification outbox: cannot record the batch's results; its rows are retried after their lease", "rows", len(rows), "lease", o.lease, "err", err)
	}
}

// outboxUpdate is the rows a batch reschedules or fails, as the columns
// of one UPDATE.
type outboxUpdate struct {
	ids      []int64
	attempts []int32
	waits    []float64
	dead     []bool
	errs     []string
}

func (u *outboxUpdate) add(r claimed, wait time.Duration, dead bool, err error) {
	u.ids = append(u.ids, r.id)
	u.attempts = append(u.attempts, int32(r.attempts))
	u.waits = append(u.waits, wait.Seconds())
	u.dead = append(u.dead, dead)
	u.errs = append(u.errs, err.Error())
}

// backoffAfter is the wait after a row's attempts-th failed attempt: the
// backoff doubled each time, at most outboxMaxBackoff, with jitter so
// that the rows of one outage do not all come due at once.
func (o *outbox) backoffAfter(attempts int) time.Duration {
	wait := o.backoff << min(attempts-1, 30)
	if wait <= 0 || wait > outboxMaxBackoff {
		wait = outboxMaxBackoff
	}
	return jittered(wait)
}

// statsLoop refreshes the depth gauges every outboxStatsEvery, and after
// a batch was delivered, but at most once per outboxStatsMinGap: the
// count reads the whole table.
func (o *outbox) statsLoop() {
	t := time.NewTicker(outboxStatsEvery)
	defer t.Stop()
	for {
		o.refreshStats()
		select {
		case <-time.After(outboxStatsMinGap):
		case <-o.n.quit:
			return
		}
		select {
		case <-t.C:
		case <-o.recount:
		case <-o.n.quit:
			return
		}
	}
}

func (o *outbox) refreshStats() {
	ctx, cancel := context.WithTimeout(o.n.ctx, o.n.timeout)
	defer cancel()
	var pending, failed int64
	var oldest float64
	err := o.store.read(ctx, func(q dbtx) error {
		return q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE failed_at IS NULL), count(*) FILTER (WHERE failed_at IS NOT NULL),
				coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE failed_at IS NULL)), 0)::float8
			FROM notify_outbox`).Scan(&pending, &failed, &oldest)
	})
	if err != nil {
		o.statsErr.Inc()
		return
	}
	o.pending.Set(float64(pending))
	o.failed.Set(float64(failed))
	o.oldest.Set(oldest)
}
