package tasks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// How task events reach WebSockets (Config.Events).
const (
	// EventsLocal is report C's way: the process that made a change tells
	// its own WebSockets, and no other process's.
	EventsLocal = "local"
	// EventsPostgres writes every change's event to an event log in the
	// change's own transaction, numbered per user, and NOTIFYs it; every
	// instance LISTENs and hands each event to its own WebSockets, which
	// can resume from the log (GET /v1/ws?after_seq=SEQ).
	EventsPostgres = "postgres"
)

const (
	// eventsChannel is the NOTIFY channel of the event log.
	eventsChannel = "tasks_events"
	// maxNotifyBody is the largest event sent in its NOTIFY: a payload
	// must be under 8,000 bytes, and "uid seq at " takes up to 60. A
	// larger event (long notes) is announced without its body, and the
	// instances with a socket of its user read it from the log.
	maxNotifyBody = 7900
	// eventPage is how many events a socket reads from the log at once.
	eventPage = 256
	// listenerPing is how long the listener waits for a notification
	// before it checks that its connection is alive: a connection whose
	// peer vanished without a reset (a dead network path) says nothing.
	listenerPing = 15 * time.Second
	// listenerTimeout bounds the listener's connect, LISTEN and pings.
	listenerTimeout = 5 * time.Second
	// The listener reconnects after listenerBackoff, doubled after each
	// failed attempt up to listenerMaxBackoff, with jitter, so that many
	// instances do not all dial a recovering Postgres at once.
	listenerBackoff    = 100 * time.Millisecond
	listenerMaxBackoff = 5 * time.Second
	// retentionBatch bounds one DELETE of old events, so that it holds
	// its locks and writes its WAL in bounded pieces.
	retentionBatch = 5000
	// retentionRounds bounds the batches of one retention pass; the next
	// pass goes on where it stopped.
	retentionRounds = 20
)

// recordEvent takes the user's next sequence number, logs the event with
// it and NOTIFYs it, in one round trip of the change's transaction.
//
// The number comes from the user's row in task_event_seqs, which the
// INSERT ... ON CONFLICT DO UPDATE locks until the change commits or
// rolls back: a second change of the same user waits there, and takes
// the next number only once the first committed. So numbers follow
// commit order per user, with no gaps (a rolled-back change gives its
// number back), which a table-wide sequence would not give: its numbers
// are taken before commit, and commits land in any order. The row is
// taken last in the change, after its task row, so two changes never
// wait on each other's rows in opposite orders. NOTIFY is sent at commit,
// and Postgres delivers notifications in commit order: each listener sees
// a user's events in sequence order.
//
// The payload is "uid seq at_unix_micros body", or without the body when
// it is over maxNotifyBody bytes.
const recordEvent = `WITH s AS (
		INSERT INTO task_event_seqs AS c (user_id, seq) VALUES ($1, 1)
		ON CONFLICT (user_id) DO UPDATE SET seq = c.seq + 1
		RETURNING user_id, seq),
	e AS (
		INSERT INTO task_events (user_id, seq, at, body)
		SELECT user_id, seq, clock_timestamp(), $2 FROM s
		RETURNING user_id, seq, at, body)
	SELECT seq, pg_notify($3, user_id || ' ' || seq || ' ' || (extract(epoch FROM at) * 1000000)::bigint ||
		CASE WHEN octet_length(body) <= $4 THEN ' ' || body ELSE '' END)
	FROM e`

// eventLog is the change recorder of EventsPostgres: it logs each
// change's event in the change's transaction and sets its sequence.
type eventLog struct{}

func (eventLog) record(ctx context.Context, q dbtx, uid int64, ev *Event) error {
	ev.Seq = 0 // the logged body has no sequence: the row's column holds it
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("tasks: encode event: %w", err)
	}
	if err := q.QueryRow(ctx, recordEvent, uid, string(body), eventsChannel, maxNotifyBody).Scan(&ev.Seq, nil); err != nil {
		return fmt.Errorf("tasks: log the task event: %w", err)
	}
	return nil
}

// loggedEvent is an event as the log holds it, ready for a socket.
type loggedEvent struct {
	seq int64
	at  time.Time
	msg []byte
}

// withSeq is the event's JSON body with its sequence put first.
func withSeq(seq int64, body string) []byte {
	b := make([]byte, 0, len(body)+24)
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	if body != "{}" {
		b = append(b, ',')
	}
	return append(b, body[1:]...)
}

// lastEventSeq is the sequence of uid's last committed event (0: none).
// Every event up to it is committed, in the log or deleted by retention.
func (s *store) lastEventSeq(ctx context.Context, uid int64) (int64, error) {
	var seq int64
	err := s.read(ctx, func(q dbtx) error {
		return q.QueryRow(ctx, `SELECT coalesce((SELECT seq FROM task_event_seqs WHERE user_id = $1), 0)`, uid).Scan(&seq)
	})
	return seq, err
}

// eventsAfter reads at most limit of uid's logged events after seq
// after, up to upTo, in order.
func (s *store) eventsAfter(ctx context.Context, uid, after, upTo int64, limit int) ([]loggedEvent, error) {
	out := make([]loggedEvent, 0, min(limit, int(upTo-after)))
	err := s.read(ctx, func(q dbtx) error {
		rows, err := q.Query(ctx, `SELECT seq, at, body FROM task_events WHERE user_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`,
			uid, after, upTo, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e loggedEvent
			var body string
			if err := rows.Scan(&e.seq, &e.at, &body); err != nil {
				return err
			}
			e.msg = withSeq(e.seq, body)
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

// deleteOldEvents deletes up to retentionBatch events older than keep
// and returns how many it deleted.
func (s *store) deleteOldEvents(ctx context.Context, keep time.Duration) (int64, error) {
	var n int64
	err := s.write(ctx, func(q dbtx) error {
		tag, err := q.Exec(ctx, `DELETE FROM task_events WHERE (user_id, seq) IN (
			SELECT user_id, seq FROM task_events WHERE at < now() - $1 * interval '1 microsecond' LIMIT $2)`,
			keep.Microseconds(), retentionBatch)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

// eventMetrics are what an operator watches of EventsPostgres.
type eventMetrics struct {
	delivered  *prometheus.CounterVec
	lag        *prometheus.HistogramVec
	duplicates prometheus.Counter
	logReads   *prometheus.CounterVec
	refused    prometheus.Counter
	reconnects prometheus.Counter
	listening  prometheus.Gauge
	deleted    prometheus.Counter
}

func newEventMetrics(reg prometheus.Registerer) *eventMetrics {
	m := &eventMetrics{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tasks_events_delivered_total",
			Help: "Task events written to WebSockets, by path: live (from this instance's listener) or log (read from the event log: a resume, a gap, or after the listener reconnected)."}, []string{"path"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tasks_events_delivery_lag_seconds",
			Help:    "From a change's commit (its event's time in the log, Postgres' clock) to the event's write to a WebSocket (this instance's clock), by path (live or log).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"path"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "tasks_events_duplicates_total",
			Help: "Live task events a WebSocket had already been sent from the log, and was not sent again."}),
		logReads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tasks_events_log_reads_total",
			Help: "Reads of the event log for a WebSocket, by reason: resume (?after_seq=), gap (a live event came before ones it had not been sent), resync (the listener reconnected, or an event too large for NOTIFY)."}, []string{"reason"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "tasks_events_resume_refused_total",
			Help: "WebSockets closed with 4002 (list your tasks again): the events after their ?after_seq= are older than the retention, or the number is ahead of the account's."}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: "tasks_events_listener_reconnects_total",
			Help: "Times the event listener's Postgres connection was lost and opened again."}),
		listening: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tasks_events_listener_up",
			Help: "1 while the event listener's connection LISTENs; 0 while it reconnects (live events from other instances wait, then come from the log)."}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "tasks_events_retention_deleted_total",
			Help: "Events the retention deleted from the event log for being older than --event-retention."}),
	}
	reg.MustRegister(m.delivered, m.lag, m.duplicates, m.logReads, m.refused, m.reconnects, m.listening, m.deleted)
	return m
}

// eventBus is one instance's side of EventsPostgres: a listener on a
// dedicated connection that hands each notified event to the local hub,
// and the retention of the log.
type eventBus struct {
	cfg    *Config
	log    *slog.Logger
	store  *store
	hub    *hub
	m      *eventMetrics
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startEventBus connects the listener and starts it and the retention.
// It fails when the listener cannot LISTEN: a socket accepted after New
// returns must not miss a change committed after it.
func startEventBus(ctx context.Context, cfg *Config, log *slog.Logger, st *store, h *hub) (*eventBus, error) {
	b := &eventBus{cfg: cfg, log: log, store: st, hub: h, m: newEventMetrics(cfg.Registry)}
	conn, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	b.m.listening.Set(1)
	ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.wg.Go(func() { b.listen(ctx, conn) })
	b.wg.Go(func() { b.retain(ctx) })
	return b, nil
}

// stop stops the listener and the retention.
func (b *eventBus) stop() {
	b.cancel()
	b.wg.Wait()
}

// connect opens the listener's connection and LISTENs on it.
func (b *eventBus) connect(ctx context.Context) (*pgx.Conn, error) {
	pc, err := pgx.ParseConfig(b.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("tasks: event listener: %w", err)
	}
	// Named, so that an operator finds it in pg_stat_activity.
	pc.RuntimeParams["application_name"] = "tasks events listener"
	// Postgres keeps every notification until each listening backend has
	// read it: the backend of a listener whose instance vanished (its host
	// died, its path went dead) would hold the queue for the system's
	// keepalive time, two hours by default. Its keepalives find it within
	// about a minute instead.
	pc.RuntimeParams["tcp_keepalives_idle"] = "30"
	pc.RuntimeParams["tcp_keepalives_interval"] = "10"
	pc.RuntimeParams["tcp_keepalives_count"] = "3"
	ctx, cancel := context.WithTimeout(ctx, listenerTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("tasks: event listener: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("tasks: event listener: LISTEN: %w", err)
	}
	return conn, nil
}

// listen hands notified events to the hub until ctx ends. When the
// connection is lost, it reconnects with backoff, and then has every
// local socket read from the log what it missed meanwhile: LISTEN is in
// place again before the sockets read, so every event is either read or
// notified (a socket drops the ones it was sent twice).
func (b *eventBus) listen(ctx context.Context, conn *pgx.Conn) {
	for {
		err := b.receive(ctx, conn)
		conn.Close(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			return
		}
		b.m.listening.Set(0)
		b.log.Warn("event listener lost its connection: reconnecting; the WebSockets here will read what they missed from the event log", "err", err)
		if conn = b.reconnect(ctx); conn == nil {
			return
		}
		b.m.reconnects.Inc()
		b.m.listening.Set(1)
		b.log.Info("event listener reconnected")
		b.hub.resyncAll()
	}
}

// reconnect connects until it succeeds or ctx ends (then nil).
func (b *eventBus) reconnect(ctx context.Context) *pgx.Conn {
	wait := listenerBackoff
	for {
		t := time.NewTimer(jittered(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := b.connect(ctx)
		if err == nil {
			return conn
		}
		b.log.Warn("event listener: reconnect failed", "err", err, "retry_in", wait)
		wait = min(2*wait, listenerMaxBackoff)
	}
}

// receive delivers notifications until the connection fails or ctx ends.
func (b *eventBus) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, cmp.Or(b.cfg.listenerPing, listenerPing))
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			b.deliver(n.Payload)
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, cmp.Or(b.cfg.listenerPing, listenerTimeout))
			_, err = conn.Exec(pctx, ";")
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		default:
			return err
		}
	}
}

// deliver hands one notified event to the sockets of its user here, if
// any. An event notified without its body (too large for NOTIFY) has the
// user's sockets read it from the log.
func (b *eventBus) deliver(payload string) {
	uid, seq, at, body, err := parseNotification(payload)
	if err != nil {
		b.log.Error("event listener: unreadable notification", "err", err)
		return
	}
	if !b.hub.has(uid) {
		return
	}
	if body == "" {
		b.hub.resync(uid)
		return
	}
	b.hub.send(uid, wsMessage{seq: seq, at: at, data: withSeq(seq, body)})
}

// parseNotification reads recordEvent's payload.
func parseNotification(p string) (uid, seq int64, at time.Time, body string, err error) {
	f := strings.SplitN(p, " ", 4)
	if len(f) < 3 {
		return 0, 0, at, "", fmt.Errorf("payload %.40q: want uid seq at [body]", p)
	}
	uid, err1 := strconv.ParseInt(f[0], 10, 64)
	seq, err2 := strconv.ParseInt(f[1], 10, 64)
	us, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, at, "", fmt.Errorf("payload %.40q: %w", p, err)
	}
	if len(f) == 4 {
		body = f[3]
		if !strings.HasPrefix(body, "{") {
			return 0, 0, at, "", fmt.Errorf("payload %.40q: the body is not a JSON object", p)
		}
	}
	return uid, seq, time.UnixMicro(us), body, nil
}

// retain deletes events older than the retention, in bounded batches, a
// few times per retention window (every instance does: a batch another
// instance deleted first is simply found empty).
func (b *eventBus) retain(ctx context.Context) {
	every := min(b.cfg.EventRetention/4, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range retentionRounds {
			dctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
			n, err := b.store.deleteOldEvents(dctx, b.cfg.EventRetention)
			cancel()
			b.m.deleted.Add(float64(n))
			if err != nil {
				if ctx.Err() == nil {
					b.log.Warn("event log retention: delete failed; retrying on the next pass", "err", err)
				}
				break
			}
			if n < retentionBatch {
				break
			}
		}
	}
}

// errResyncNeeded is a socket's resume or catch-up that cannot give every
// event it asked for: the socket is closed with StatusResyncNeeded and
// the reason (a close reason has at most 123 bytes).
type errResyncNeeded struct{ reason string }

// errEventLog is a failed read of the event log for a socket: the socket
// is closed with 1013 (try again later) and the sequence to resume after.
var errEventLog = errors.New("tasks: the event log is unreachable")

func (e *errResyncNeeded) Error() string { return e.reason }

// cursor is one WebSocket's place in its user's event log under
// EventsPostgres: the last sequence it was sent. Sockets write events in
// sequence order, each once: a live event it was sent from the log is
// dropped, and one that comes after a gap has the gap read from the log
// first.
type cursor struct {
	uid   int64
	last  int64
	store *store
	m     *eventMetrics
	// timeout bounds each read of the log.
	timeout time.Duration
	write   func(m wsMessage) error
}

// cursor returns a cursor for a socket of uid that writes with write.
func (b *eventBus) cursor(uid int64, write func(wsMessage) error) *cursor {
	return &cursor{uid: uid, store: b.store, m: b.m, timeout: b.cfg.RequestTimeout, write: write}
}

// start places the cursor: after the user's last committed event, or
// with after >= 0 after that one, first sending what followed it.
func (c *cursor) start(ctx context.Context, after int64) error {
	last, err := c.lastSeq(ctx)
	if err != nil {
		return err
	}
	if after < 0 {
		c.last = last
		return nil
	}
	if after > last {
		c.m.refused.Inc()
		return &errResyncNeeded{fmt.Sprintf("after_seq %d is past the last event, %d: list your tasks, reconnect without after_seq", after, last)}
	}
	c.last = after
	return c.catchUp(ctx, last, "resume")
}

// live writes a live event, after the ones before it that the socket was
// not sent, or drops it when the socket was sent it already.
func (c *cursor) live(ctx context.Context, m wsMessage) error {
	if m.seq <= c.last {
		c.m.duplicates.Inc()
		return nil
	}
	if m.seq > c.last+1 {
		if err := c.catchUp(ctx, m.seq-1, "gap"); err != nil {
			return err
		}
	}
	if err := c.write(m); err != nil {
		return err
	}
	c.last = m.seq
	c.m.delivered.WithLabelValues("live").Inc()
	c.m.lag.WithLabelValues("live").Observe(time.Since(m.at).Seconds())
	return nil
}

// resync writes what the log holds after the socket's last event.
func (c *cursor) resync(ctx context.Context) error {
	last, err := c.lastSeq(ctx)
	if err != nil {
		return err
	}
	return c.catchUp(ctx, last, "resync")
}

func (c *cursor) lastSeq(ctx context.Context) (seq int64, err error) {
	err = c.readLog(ctx, func(ctx context.Context) (err error) {
		seq, err = c.store.lastEventSeq(ctx, c.uid)
		return err
	})
	return seq, err
}

// logReadAttempts is how many times a socket tries a read of the log: a
// read right after an outage may get a pooled connection that the outage
// broke, which the pool then discards.
const logReadAttempts = 3

// readLog runs the read f, each attempt bounded by the cursor's timeout.
func (c *cursor) readLog(ctx context.Context, f func(ctx context.Context) error) error {
	var err error
	for range logReadAttempts {
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		err = f(rctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errEventLog, err)
	}
	return nil
}

// catchUp writes the logged events after the socket's last up to upTo,
// all committed; one missing was deleted by the retention.
func (c *cursor) catchUp(ctx context.Context, upTo int64, reason string) error {
	if upTo <= c.last {
		return nil
	}
	c.m.logReads.WithLabelValues(reason).Inc()
	for c.last < upTo {
		var evs []loggedEvent
		err := c.readLog(ctx, func(ctx context.Context) (err error) {
			evs, err = c.store.eventsAfter(ctx, c.uid, c.last, upTo, eventPage)
			return err
		})
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return c.tooOld()
		}
		for _, e := range evs {
			if e.seq != c.last+1 {
				return c.tooOld()
			}
			if err := c.write(wsMessage{seq: e.seq, at: e.at, data: e.msg}); err != nil {
				return err
			}
			c.last = e.seq
			c.m.delivered.WithLabelValues("log").Inc()
			c.m.lag.WithLabelValues("log").Observe(time.Since(e.at).Seconds())
		}
	}
	return nil
}

// tooOld is the refusal of a catch-up past the log's oldest event.
func (c *cursor) tooOld() error {
	c.m.refused.Inc()
	return &errResyncNeeded{fmt.Sprintf("events after seq %d are no longer kept: list your tasks, reconnect without after_seq", c.last)}
}
