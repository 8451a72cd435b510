package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	send chan []byte
	// slow is closed when the client fell behind; gone when the hub closes.
	slow, gone chan struct{}
	slowOnce   sync.Once
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
	c := &wsClient{send: make(chan []byte, wsBuffer), slow: make(chan struct{}), gone: make(chan struct{})}
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

// publish sends ev to uid's WebSockets without ever blocking: a client
// whose buffer is full is marked slow and disconnected.
func (h *hub) publish(uid int64, ev Event) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	cs := h.users[uid]
	if len(cs) == 0 {
		return
	}
	msg, err := json.Marshal(ev)
	if err != nil {
		return
	}
	for c := range cs {
		select {
		case c.send <- msg:
			h.sent.Inc()
		default:
			h.dropped.Inc()
			c.slowOnce.Do(func() { close(c.slow) })
		}
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
// expires, as a request with that token would be refused then.
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
		uid, exp, ok = s.tokens.useTicket(q.Get("ticket"))
	default:
		uid, exp, ok = s.tokens.verifyUntil(bearer(r))
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tasks"`)
		writeError(w, r, ErrUnauthorized)
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
	for {
		select {
		case msg := <-c.send:
			wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
			err := conn.Write(wctx, websocket.MessageText, msg)
			cancel()
			if err != nil {
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
