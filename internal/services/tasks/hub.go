package tasks

import (
	"context"
	"encoding/json"
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
)

// hub fans a user's task events out to the WebSockets of their devices
// connected to this process.
type hub struct {
	mu     sync.RWMutex
	users  map[int64]map[*wsClient]struct{}
	closed bool

	conns         prometheus.Gauge
	sent, dropped prometheus.Counter
}

type wsClient struct {
	send chan []byte
	// slow is closed when the client fell behind; gone when the hub closes.
	slow, gone chan struct{}
	slowOnce   sync.Once
}

func newHub(reg prometheus.Registerer) *hub {
	h := &hub{
		users: map[int64]map[*wsClient]struct{}{},
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tasks_ws_connections", Help: "WebSockets open."}),
	}
	msgs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tasks_ws_messages_total", Help: "Task events for WebSockets: sent, or dropped with their slow client.",
	}, []string{"result"})
	h.sent, h.dropped = msgs.WithLabelValues("sent"), msgs.WithLabelValues("dropped")
	reg.MustRegister(h.conns, msgs)
	return h
}

func (h *hub) add(uid int64) (*wsClient, bool) {
	c := &wsClient{send: make(chan []byte, wsBuffer), slow: make(chan struct{}), gone: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	cs := h.users[uid]
	if cs == nil {
		cs = map[*wsClient]struct{}{}
		h.users[uid] = cs
	}
	cs[c] = struct{}{}
	h.conns.Inc()
	return c, true
}

func (h *hub) remove(uid int64, c *wsClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cs := h.users[uid]; cs != nil {
		if _, ok := cs[c]; ok {
			delete(cs, c)
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
// Event per text message. Browsers, which cannot set headers on a
// WebSocket, may pass the token as ?token=.
func (s *Service) websocket(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if tok == "" {
		tok = r.URL.Query().Get("token")
	}
	uid, ok := s.tokens.verify(tok)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tasks"`)
		writeError(w, r, ErrUnauthorized)
		return
	}
	c, ok := s.hub.add(uid)
	if !ok {
		writeError(w, r, ErrBusy)
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
		case <-ctx.Done():
			return
		}
	}
}
