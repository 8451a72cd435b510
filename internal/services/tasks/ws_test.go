package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// dialWS opens the user's WebSocket and waits until the hub has it:
// with the token in the Authorization header, or as a browser does, with
// a ticket in the query.
func (c *client) dialWS(t *testing.T, viaTicket bool) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(c.e.srv.URL, "http") + "/v1/ws"
	opts := &websocket.DialOptions{}
	if viaTicket {
		url += "?ticket=" + c.ticket(t)
	} else {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + c.token}}
	}
	before := c.e.metric("tasks_ws_connections", nil)
	conn, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	testkit.Eventually(t, 15*time.Second, "the hub to register the WebSocket", func() bool { return c.e.metric("tasks_ws_connections", nil) > before })
	return conn
}

// ticket returns a WebSocket ticket of the user.
func (c *client) ticket(t *testing.T) string {
	t.Helper()
	a := c.do("POST", "/v1/ws/ticket", nil)
	var tk struct {
		Ticket    string    `json:"ticket"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if a.code != http.StatusCreated {
		t.Fatalf("POST /v1/ws/ticket: %s", a)
	}
	a.decode(t, &tk)
	if tk.Ticket == "" || time.Until(tk.ExpiresAt) > tasks.TicketTTL {
		t.Fatalf("ticket %+v: want one that expires within %v", tk, tasks.TicketTTL)
	}
	return tk.Ticket
}

// A bearer token never travels in a URL, which proxies log: ?token= is
// refused, and a ticket, good once, takes its place.
func TestWebSocketTokenNotInURL(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.signup("alice@example.com")
	base := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/v1/ws"
	dial := func(query string) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, resp, err := websocket.Dial(ctx, base+query, nil)
		if err == nil {
			conn.CloseNow()
		}
		return resp, err
	}
	resp, err := dial("?token=" + alice.token)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("?token=: %v %v; want 401", err, resp)
	}
	var body struct{ Error, Reason string }
	if json.NewDecoder(resp.Body).Decode(&body); body.Error != "token_in_url" || !strings.Contains(body.Reason, "ticket") {
		t.Errorf("?token= refused with %+v; want token_in_url, pointing to tickets", body)
	}
	tk := alice.ticket(t)
	if _, err := dial("?ticket=" + tk); err != nil {
		t.Fatalf("?ticket=: %v; want the socket", err)
	}
	if resp, err := dial("?ticket=" + tk); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the same ticket again: %v %v; want 401", err, resp)
	}
	if a := (&client{e: e, token: tk}).do("GET", "/v1/me", nil); a.code != http.StatusUnauthorized {
		t.Errorf("a ticket as a bearer token: %s; want 401", a)
	}
}

func readEvent(t *testing.T, conn *websocket.Conn) tasks.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, b, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("event message type %v", typ)
	}
	var ev tasks.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("event %s: %v", b, err)
	}
	return ev
}

// A WebSocket receives the changes of its own user, in order, and never
// another user's.
func TestWebSocketOwnUserOnly(t *testing.T) {
	e := newEnv(t, nil)
	alice, bob := e.signup("alice@example.com"), e.signup("bob@example.com")
	aliceWS := alice.dialWS(t, false)
	alicePhone := alice.dialWS(t, true) // a second device, a browser's ticket in the query
	bobWS := bob.dialWS(t, false)

	task := alice.createTask(map[string]any{"title": "live"})
	alice.do("PATCH", fmt.Sprintf("/v1/tasks/%d", task.ID), map[string]any{"status": "doing"})
	alice.do("DELETE", fmt.Sprintf("/v1/tasks/%d", task.ID), nil)
	for _, conn := range []*websocket.Conn{aliceWS, alicePhone} {
		for i, want := range []string{tasks.EventCreated, tasks.EventUpdated, tasks.EventDeleted} {
			ev := readEvent(t, conn)
			if ev.Type != want || ev.TaskID != task.ID {
				t.Fatalf("event %d = %+v, want %s of task %d", i, ev, want, task.ID)
			}
			if want == tasks.EventUpdated && (ev.Task == nil || ev.Task.Status != "doing") {
				t.Fatalf("update event carries %+v, want the updated task", ev.Task)
			}
		}
	}
	// Events are published before the request that caused them answers,
	// so had bob's socket been sent alice's, they would come before his own.
	own := bob.createTask(map[string]any{"title": "bob's"})
	if ev := readEvent(t, bobWS); ev.TaskID != own.ID || ev.Type != tasks.EventCreated {
		t.Fatalf("bob's first event = %+v, want his own task %d", ev, own.ID)
	}

	t.Run("needs a token", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/v1/ws"
		_, resp, err := websocket.Dial(ctx, url, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("dial without a token: %v %v, want 401", err, resp)
		}
	})

	t.Run("closed on shutdown", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.svc.Close(ctx)
		_, _, err := aliceWS.Read(ctx)
		if websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Fatalf("read after shutdown: %v, want close status going away", err)
		}
	})
}

// dialAs opens a WebSocket with token, returning the refusal's response
// when there is one.
func dialAs(t *testing.T, e *env, token string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/v1/ws"
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err == nil {
		t.Cleanup(func() { conn.CloseNow() })
	}
	return conn, resp, err
}

// A user's WebSockets are bounded: one past the bound is refused with
// 429, Retry-After and a JSON reason before the upgrade; other users are
// not affected, and a closed socket frees its place.
func TestWebSocketsPerUserBounded(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) { c.MaxWebSocketsPerUser = 2 })
	alice, bob := e.signup("alice@example.com"), e.signup("bob@example.com")
	first := alice.dialWS(t, false)
	alice.dialWS(t, true)

	_, resp, err := dialAs(t, e, alice.token)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third socket of alice: %v %v, want 429", err, resp)
	}
	var body struct{ Error, Reason string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error != "too_many_websockets" || body.Reason == "" {
		t.Fatalf("refusal body %+v (%v), want too_many_websockets with a reason", body, err)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q, want seconds", resp.Header.Get("Retry-After"))
	}
	if n := e.metric("tasks_ws_refused_total", nil); n != 1 {
		t.Errorf("tasks_ws_refused_total = %v, want 1", n)
	}
	bob.dialWS(t, false) // the bound is per user

	before := e.metric("tasks_ws_connections", nil)
	first.Close(websocket.StatusNormalClosure, "")
	testkit.Eventually(t, 15*time.Second, "the closed socket to leave the hub", func() bool { return e.metric("tasks_ws_connections", nil) < before })
	if _, resp, err := dialAs(t, e, alice.token); err != nil {
		t.Fatalf("socket of alice after closing one: %v %v, want accepted", err, resp)
	}
}

// The process's WebSockets are bounded, every user's together: accounts
// are cheap, so a bound per user alone does not bound the process.
func TestWebSocketsBoundedOnTheServer(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) { c.MaxWebSockets = 2 })
	a, b, c := e.signup("a@example.com"), e.signup("b@example.com"), e.signup("c@example.com")
	a.dialWS(t, false)
	b.dialWS(t, false)
	_, resp, err := dialAs(t, e, c.token)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third user's socket past --max-websockets 2: %v %v, want 503", err, resp)
	}
	var body struct{ Error, Reason string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error != "server_full" {
		t.Errorf("refusal body %+v (%v), want server_full", body, err)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want seconds", resp.Header.Get("Retry-After"))
	}
}

// A WebSocket is closed when its token expires, with StatusTokenExpired
// and a reason, as a request with that token would be refused then.
func TestWebSocketClosedAtTokenExpiry(t *testing.T) {
	const ttl = 3 * time.Second // tokens expire on a whole second: in 2-3 s
	e := newEnv(t, func(c *tasks.Config) { c.TokenTTL = ttl })
	a := e.anon().do("POST", "/v1/auth/signup", map[string]string{"email": "alice@example.com", "password": "password-of-alice"})
	var s struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	a.decode(t, &s)
	alice := &client{e: e, token: s.Token}
	ws := alice.dialWS(t, false)

	ctx, cancel := context.WithTimeout(context.Background(), ttl+10*time.Second)
	defer cancel()
	_, _, err := ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != tasks.StatusTokenExpired || !strings.Contains(ce.Reason, "token expired") {
		t.Fatalf("read: %v, want close %d with the reason token expired", err, tasks.StatusTokenExpired)
	}
	if now := time.Now(); now.Before(s.ExpiresAt) {
		t.Fatalf("closed at %v, before the token's expiry %v", now, s.ExpiresAt)
	}
}

// A WebSocket ticket is good once on all the instances of a deployment
// together: used on one, it is refused on another (a ticket travels in a
// URL, which proxies log, so a copy of it must not open a second socket).
func TestTicketGoodOnceAcrossInstances(t *testing.T) {
	dsn := newDatabase(t)
	a, b := newEnvOn(t, dsn, nil), newEnvOn(t, dsn, nil)
	alice := a.signup("alice@example.com")
	dial := func(e *env, tk string) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+"/v1/ws?ticket="+tk, nil)
		if err == nil {
			conn.CloseNow()
		}
		return resp, err
	}
	tk := alice.ticket(t)
	if _, err := dial(b, tk); err != nil {
		t.Fatalf("a ticket of instance A on instance B: %v; want the socket (the instances share the token secret)", err)
	}
	for name, e := range map[string]*env{"A": a, "B": b} {
		if resp, err := dial(e, tk); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the ticket again, on instance %s: %v %v; want 401", name, err, resp)
		}
	}
}
