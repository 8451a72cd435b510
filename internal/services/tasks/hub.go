package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// WebSocket tuning: a device that cannot take wsBuffer events in a row
// is too slow and is disconnected (it reconnects and lists its tasks),
// so one stuck phone never holds memory or a publisher.
const (
	wsBuffer       = 64
	wsWriteTimeout = 5 * time.Second
	wsPingInterval = 30 * time.Second
	// wsLostWithin is how soon a socket whose device vanished without a
	// close (a phone out of coverage) is found and closed: its next ping
	// goes unanswered. It is the Retry-After of a socket over the bound.
	wsLostWithin = wsPingInterval + wsWriteTimeout
)

// StatusTokenExpired is the close code of a WebSocket whose token
// expired (the 4000-4999 range is the application's): log in again and
// reconnect with the new token.
const StatusTokenExpired websocket.StatusCode = 4001

// StatusResyncNeeded is the close code of a WebSocket that cannot be
// given every event after the sequence it asked for (?after_seq=): they
// are older than the event log keeps (Config.EventRetention), or the
// number is ahead of the account's last event (a number from another
// deployment). List your tasks again, then reconnect without after_seq.
const StatusResyncNeeded websocket.StatusCode = 4002

// hub fans a user's task events out to the WebSockets of their devices
// connected to this process.
type hub struct {
	maxPerUser int // negative: no bound
	max        int // all users' together; negative: no bound

	mu     sync.RWMutex
	users  map[int64]map[*wsClient]struct{}
	open   int // sockets in users
	closed bool

	conns         prometheus.Gauge
	refused       prometheus.Counter
	sent, dropped prometheus.Counter
}

type wsClient struct {
	send chan wsMessage
	// resync asks the socket to read from the event log what came after
	// the last event it was sent (EventsPostgres): one pending is enough.
	resync chan struct{}
	// slow is closed when the client fell behind; gone when the hub closes.
	slow, gone chan struct{}
	slowOnce   sync.Once
}

// wsMessage is an event for a socket: its JSON, and under EventsPostgres
// its sequence and the time its change committed (seq 0 otherwise).
type wsMessage struct {
	seq  int64
	at   time.Time
	data []byte
}

func newHub(reg prometheus.Registerer, maxPerUser, max int) *hub {
	h := &hub{
		maxPerUser: maxPerUser,
		max:        max,
		users:      map[int64]map[*wsClient]struct{}{},
		conns:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "tasks_ws_connections", Help: "WebSockets open."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tasks_ws_refused_total", Help: "WebSockets refused: their user had --max-websockets-per-user open (429), or the process --max-websockets (503).",
		}),
	}
	msgs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tasks_ws_messages_total", Help: "Task events for WebSockets: sent, or dropped with their slow client.",
	}, []string{"result"})
	h.sent, h.dropped = msgs.WithLabelValues("sent"), msgs.WithLabelValues("dropped")
	reg.MustRegister(h.conns, h.refused, msgs)
	return h
}

// add registers a WebSocket of uid. It returns ErrBusy once the hub is
// closed, and a LimitError when the process has max sockets open, or uid
// maxPerUser.
func (h *hub) add(uid int64) (*wsClient, error) {
	c := &wsClient{send: make(chan wsMessage, wsBuffer), resync: make(chan struct{}, 1), slow: make(chan struct{}), gone: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrBusy
	}
	if h.max >= 0 && h.open >= h.max {
		h.refused.Inc()
		return nil, &LimitError{Kind: "server_full", Status: http.StatusServiceUnavailable, RetryAfter: wsLostWithin,
			Reason: fmt.Sprintf("this server holds its limit of %d WebSockets: retry after the seconds in Retry-After, or connect to another instance", h.max)}
	}
	cs := h.users[uid]
	if h.maxPerUser >= 0 && len(cs) >= h.maxPerUser {
		h.refused.Inc()
		return nil, &LimitError{Kind: "too_many_websockets", RetryAfter: wsLostWithin,
			Reason: fmt.Sprintf("this account has %d WebSockets open on this server, the most allowed: close one first "+
				"(a lost device's socket is closed within %.0f s, the Retry-After)", len(cs), wsLostWithin.Seconds())}
	}
	if cs == nil {
		cs = map[*wsClient]struct{}{}
		h.users[uid] = cs
	}
	cs[c] = struct{}{}
	h.open++
	h.conns.Inc()
	return c, nil
}

func (h *hub) remove(uid int64, c *wsClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cs := h.users[uid]; cs != nil {
		if _, ok := cs[c]; ok {
			delete(cs, c)
			h.open--
			h.conns.Dec()
		}
		if len(cs) == 0 {
			delete(h.users, uid)
		}
	}
}

// publish sends ev to uid's WebSockets here (EventsLocal).
func (h *hub) publish(uid int64, ev Event) {
	if !h.has(uid) {
		return
	}
	msg, err := json.Marshal(ev)
	if err != nil {
		return
	}
	h.send(uid, wsMessage{data: msg})
}

// has reports whether uid has a WebSocket here.
func (h *hub) has(uid int64) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.users[uid]) > 0
}

// send sends m to uid's WebSockets without ever blocking: a client whose
// buffer is full is marked slow and disconnected.
func (h *hub) send(uid int64, m wsMessage) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for c := range h.users[uid] {
		select {
		case c.send <- m:
			h.sent.Inc()
		default:
			h.dropped.Inc()
			c.slowOnce.Do(func() { close(c.slow) })
		}
	}
}

// resync asks uid's WebSockets here to read what they missed from the
// event log.
func (h *hub) resync(uid int64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for c := range h.users[uid] {
		c.askResync()
	}
}

// resyncAll asks every WebSocket here to read what it missed from the
// event log (the listener was disconnected).
func (h *hub) resyncAll() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, cs := range h.users {
		for c := range cs {
			c.askResync()
		}
	}
}

func (c *wsClient) askResync() {
	select {
	case c.resync <- struct{}{}:
	default: // one is pending already, and will read everything
	}
}

// close tells every WebSocket the service is going away.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for _, cs := range h.users {
		for c := range cs {
			close(c.gone)
		}
	}
}

// websocket serves GET /v1/ws: the signed-in user's task events, one JSON
// Event per text message. The user is the Authorization header's, or for
// a browser, which cannot set headers on a WebSocket, a ticket's from POST
// /v1/ws/ticket in ?ticket= (good once, for TicketTTL). A bearer token in
// the URL (?token=) is refused: proxies and servers log URLs. A user's
// sockets past MaxWebSocketsPerUser are refused with 429 before the
// upgrade; a socket is closed with StatusTokenExpired when its token
// expires, as a request with that token would be refused then. Under
// EventsPostgres each event carries its seq, and ?after_seq=SEQ resumes
// after the event SEQ (events.go's cursor).
func (s *Service) websocket(w http.ResponseWriter, r *http.Request) {
	var (
		uid int64
		exp time.Time
		ok  bool
	)
	q := r.URL.Query()
	switch {
	case q.Has("token"):
		writeError(w, r, &InputError{Status: http.StatusUnauthorized, Kind: "token_in_url", Field: "token",
			Reason: "a token in the URL ends up in proxies' and servers' logs: send it in the Authorization header, or get a ticket from POST /v1/ws/ticket and pass ?ticket="})
		return
	case q.Has("ticket"):
		var err error
		if uid, exp, ok, err = s.useTicket(r.Context(), q.Get("ticket")); err != nil {
			writeError(w, r, err)
			return
		}
	default:
		uid, exp, ok = s.tokens.verifyUntil(bearer(r))
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tasks"`)
		writeError(w, r, ErrUnauthorized)
		return
	}
	after, err := s.afterSeq(q)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !isWebSocketUpgrade(r) {
		writeError(w, r, ErrUpgradeRequired)
		return
	}
	c, err := s.hub.add(uid)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer s.hub.remove(uid, c)
	// Hijacking the connection lifts the server's read and write
	// timeouts (net/http clears its deadlines), so they do not cut the
	// socket; its writes are bounded by wsWriteTimeout instead.
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the client
	}
	defer conn.CloseNow()
	// The client sends nothing; reading answers pings and notices a close.
	ctx := conn.CloseRead(context.WithoutCancel(r.Context()))
	ping := time.NewTicker(wsPingInterval)
	defer ping.Stop()
	expiry := time.NewTimer(exp.Sub(s.tokens.now()))
	defer expiry.Stop()
	write := func(m wsMessage) error {
		wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
		defer cancel()
		return conn.Write(wctx, websocket.MessageText, m.data)
	}
	// Under EventsPostgres the socket keeps its place in the user's event
	// log, and sends each event once, in order.
	var cur *cursor
	if s.events != nil {
		cur = s.events.cursor(uid, write)
		if err := cur.start(ctx, after); err != nil {
			closeForLog(conn, cur, err)
			return
		}
	}
	for {
		select {
		case m := <-c.send:
			if cur == nil {
				err = write(m)
			} else {
				err = cur.live(ctx, m)
			}
			if err != nil {
				closeForLog(conn, cur, err)
				return
			}
		case <-c.resync:
			if cur == nil {
				continue
			}
			if err := cur.resync(ctx); err != nil {
				closeForLog(conn, cur, err)
				return
			}
		case <-ping.C:
			pctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return
			}
		case <-c.slow:
			conn.Close(websocket.StatusPolicyViolation, "too slow: reconnect and list your tasks")
			return
		case <-c.gone:
			conn.Close(websocket.StatusGoingAway, "the service is shutting down")
			return
		case <-expiry.C:
			conn.Close(StatusTokenExpired, "token expired: log in again and reconnect with the new token")
			return
		case <-ctx.Done():
			return
		}
	}
}

// afterSeq reads the WebSocket's ?after_seq= (-1 when absent): the seq of
// the last event the device received, to resume after.
func (s *Service) afterSeq(q url.Values) (int64, error) {
	if !q.Has("after_seq") {
		return -1, nil
	}
	if s.events == nil {
		return 0, &InputError{Status: http.StatusBadRequest, Kind: "no_event_log", Field: "after_seq",
			Reason: "this deployment keeps no event log to resume from (--events local): connect without after_seq and list your tasks"}
	}
	v := q.Get("after_seq")
	seq, err := strconv.ParseInt(v, 10, 64)
	if err != nil || seq < 0 || len(q["after_seq"]) > 1 {
		return 0, malformed("after_seq", "must be the seq of the last event the device received, a non-negative integer, once; got %q", v)
	}
	return seq, nil
}

// closeForLog closes a socket whose events could not all be sent: with
// StatusResyncNeeded when the log no longer has them, with 1013 (try
// again later) and where to resume when the log did not answer. A failed
// write needs no close: the peer is gone or too slow to read one.
func closeForLog(conn *websocket.Conn, cur *cursor, err error) {
	var rn *errResyncNeeded
	switch {
	case errors.As(err, &rn):
		conn.Close(StatusResyncNeeded, rn.reason)
	case errors.Is(err, errEventLog):
		conn.Close(websocket.StatusTryAgainLater, fmt.Sprintf("event log unreachable: reconnect with after_seq=%d", cur.last))
	}
}
