package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/lb"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// onEventLog runs a service with --events postgres.
func onEventLog(c *tasks.Config) {
	c.Events = tasks.EventsPostgres
	c.MaxConns = 8
	c.SignupIPRate = -1
}

// cluster is instances of the service on one database behind the
// built-in balancer.
type cluster struct {
	t         *testing.T
	instances []*env
	lb        *httptest.Server
	front     *env // requests through the balancer
}

func newCluster(t *testing.T, n int, mutate func(*tasks.Config)) *cluster {
	t.Helper()
	dsn := newDatabase(t)
	c := &cluster{t: t}
	var ups []string
	for range n {
		e := newEnvOn(t, dsn, mutate)
		c.instances = append(c.instances, e)
		ups = append(ups, strings.TrimPrefix(e.srv.URL, "http://"))
	}
	h, err := lb.New(lb.Config{Upstreams: ups, IdleConnsPerUpstream: 64}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c.lb = httptest.NewServer(h)
	t.Cleanup(func() {
		c.lb.CloseClientConnections()
		c.lb.Close()
	})
	front := *c.instances[0]
	front.srv = c.lb
	c.front = &front
	return c
}

// metric sums name over the instances.
func (c *cluster) metric(name string, labels map[string]string) float64 {
	var sum float64
	for _, e := range c.instances {
		sum += e.metric(name, labels)
	}
	return sum
}

// killListener terminates one instance's event listener connection in
// Postgres (pg_terminate_backend: the server drops it, as a failover or a
// network cut would), and returns how many it killed.
func (c *cluster) killListener() int {
	c.t.Helper()
	var n int
	err := c.instances[0].db.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM (
		SELECT pid FROM pg_stat_activity WHERE application_name = 'tasks events listener' AND datname = current_database() LIMIT 1) l`).Scan(&n)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// received is one event as a device got it.
type received struct {
	Seq    int64  `json:"seq"`
	Type   string `json:"type"`
	TaskID int64  `json:"task_id"`
}

// device is a WebSocket of a user that, like a phone, opens it with
// ?after_seq= its last event, and reopens it so whenever it closes.
type device struct {
	user       *client
	base       string // ws://host:port
	mu         sync.Mutex
	got        []received
	reconnects int
	closes     []string // why the server closed it, when it did
}

// last is the seq of the last event the device received: 0 before the
// first, since its account is new, so that it receives every event (a
// socket opened without after_seq starts after the events committed
// before it is in place, which a writer may race).
func (d *device) last() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.got) == 0 {
		return 0
	}
	return d.got[len(d.got)-1].Seq
}

func (d *device) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// dial opens the device's socket, resuming after its last event if any.
func (d *device) dial(ctx context.Context) (*websocket.Conn, error) {
	url := fmt.Sprintf("%s/v1/ws?after_seq=%d", d.base, d.last())
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + d.user.token}}})
	return conn, err
}

// run reads events until ctx ends, reconnecting when the socket closes.
func (d *device) run(ctx context.Context, conn *websocket.Conn) {
	for {
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				conn.CloseNow()
				if ctx.Err() != nil {
					return
				}
				d.mu.Lock()
				d.closes = append(d.closes, err.Error())
				d.mu.Unlock()
				break
			}
			var ev received
			if err := json.Unmarshal(b, &ev); err != nil {
				panic(fmt.Sprintf("event %s: %v", b, err))
			}
			d.mu.Lock()
			d.got = append(d.got, ev)
			d.mu.Unlock()
		}
		for {
			var err error
			if conn, err = d.dial(ctx); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		d.mu.Lock()
		d.reconnects++
		d.mu.Unlock()
	}
}

// change is one task change a writer made, as it expects its event.
type change struct {
	typ    string
	taskID int64
}

// Two instances on the event log behind the built-in balancer: 50
// devices (10 users, 5 each) spread over both, 5,000 changes made
// through the balancer by four writers per user (so a user's changes
// commit concurrently, on both instances), and one instance's listener
// connection killed mid-run. Every device receives every event of its
// user exactly once, in commit order (seq 1, 2, ... without a gap), and
// each task's events in the order its writer made them.
func TestEventsAcrossInstances(t *testing.T) {
	const (
		users          = 10
		devicesPerUser = 5
		writersPerUser = 4
		changes        = 5000
		killAt         = changes / 3
	)
	c := newCluster(t, 2, onEventLog)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	var clients []*client
	for i := range users {
		clients = append(clients, c.front.signup(fmt.Sprintf("user%d@example.com", i)))
	}
	// Devices connect through the balancer, which spreads them.
	var devices []*device
	var readers sync.WaitGroup
	base := "ws" + strings.TrimPrefix(c.lb.URL, "http")
	for i := range users * devicesPerUser {
		d := &device{user: clients[i%users], base: base}
		conn, err := d.dial(ctx)
		if err != nil {
			t.Fatalf("device %d: %v", i, err)
		}
		devices = append(devices, d)
		readers.Go(func() { d.run(ctx, conn) })
	}
	defer func() { stop(); readers.Wait() }()
	testkit.Eventually(t, 15*time.Second, "every device's socket in a hub", func() bool {
		return c.metric("tasks_ws_connections", nil) == users*devicesPerUser
	})
	for i, e := range c.instances {
		if n := e.metric("tasks_ws_connections", nil); n == 0 {
			t.Fatalf("instance %d holds no socket: the balancer did not spread the devices", i)
		}
	}

	// Writers: each makes its share of changes on tasks of its own, so
	// that its order of a task's changes is the order they commit in.
	var (
		sent    atomic.Int64
		killed  atomic.Bool
		mu      sync.Mutex
		byUser  = map[int64][]change{}
		writers sync.WaitGroup
		failed  atomic.Int64
	)
	perWriter := changes / (users * writersPerUser)
	for w := range users * writersPerUser {
		u := clients[w%users]
		writers.Go(func() {
			var mine []change
			var live []int64
			for i := range perWriter {
				var ch change
				switch {
				case len(live) < 3 || i%4 == 0:
					task, code := u.try("POST", "/v1/tasks", map[string]any{"title": fmt.Sprintf("w%d-%d", w, i)})
					if code != http.StatusCreated {
						failed.Add(1)
						continue
					}
					live = append(live, task.ID)
					ch = change{tasks.EventCreated, task.ID}
				case i%4 == 3:
					id := live[0]
					if _, code := u.try("DELETE", fmt.Sprintf("/v1/tasks/%d", id), nil); code != http.StatusNoContent {
						failed.Add(1)
						continue
					}
					live = live[1:]
					ch = change{tasks.EventDeleted, id}
				default:
					id := live[i%len(live)]
					if _, code := u.try("PATCH", fmt.Sprintf("/v1/tasks/%d", id), map[string]any{"priority": i % 4}); code != http.StatusOK {
						failed.Add(1)
						continue
					}
					ch = change{tasks.EventUpdated, id}
				}
				mine = append(mine, ch)
				if sent.Add(1) == killAt && killed.CompareAndSwap(false, true) {
					if c.killListener() != 1 {
						panic("no listener connection to kill")
					}
				}
			}
			mu.Lock()
			byUser[u.id] = append(byUser[u.id], mine...)
			mu.Unlock()
		})
	}
	writers.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d changes failed", n)
	}
	testkit.Eventually(t, 30*time.Second, "the killed listener to reconnect", func() bool {
		return c.metric("tasks_events_listener_reconnects_total", nil) >= 1
	})
	want := func(d *device) int { return len(byUser[d.user.id]) }
	// Wait for every event to arrive (or for the deadline: the counts
	// below then say what was lost).
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		done := true
		for _, d := range devices {
			done = done && d.count() >= want(d)
		}
		if done {
			break
		}
	}
	time.Sleep(100 * time.Millisecond) // room for a duplicate to show
	stop()
	readers.Wait()

	var total, gotTotal, outOfOrder, lost, dups, wrongTask, reconnects int
	for _, d := range devices {
		expected := byUser[d.user.id]
		total += len(expected)
		gotTotal += len(d.got)
		reconnects += d.reconnects
		seen := map[int64]bool{}
		var prev int64
		perTask := map[int64][]string{}
		for _, ev := range d.got {
			switch {
			case seen[ev.Seq]:
				dups++
				continue
			case ev.Seq != prev+1:
				outOfOrder++
			}
			seen[ev.Seq], prev = true, ev.Seq
			perTask[ev.TaskID] = append(perTask[ev.TaskID], ev.Type)
		}
		for seq := int64(1); seq <= int64(len(expected)); seq++ {
			if !seen[seq] {
				lost++
			}
		}
		wantTask := map[int64][]string{}
		for _, ch := range expected {
			wantTask[ch.taskID] = append(wantTask[ch.taskID], ch.typ)
		}
		for id, types := range wantTask {
			if strings.Join(perTask[id], ",") != strings.Join(types, ",") {
				wrongTask++
			}
		}
		if len(d.got) != len(expected) {
			t.Logf("device of user %d: received %d of %d, seq %d to %d", d.user.id, len(d.got), len(expected), d.got[0].Seq, prev)
		}
		if len(d.closes) > 0 {
			t.Logf("device of user %d: closed %d times, first: %.200s", d.user.id, len(d.closes), d.closes[0])
		}
	}
	t.Logf("changes sent %d (through the balancer); events expected at the devices %d, received %d; out of order %d, lost %d, duplicates %d, tasks whose events came in another order than made %d; device reconnects %d",
		sent.Load(), total, gotTotal, outOfOrder, lost, dups, wrongTask, reconnects)
	t.Logf("delivered live %v, from the log %v; log reads: resume %v, gap %v, resync %v; duplicates dropped at sockets %v; listener reconnects %v",
		c.metric("tasks_events_delivered_total", map[string]string{"path": "live"}), c.metric("tasks_events_delivered_total", map[string]string{"path": "log"}),
		c.metric("tasks_events_log_reads_total", map[string]string{"reason": "resume"}), c.metric("tasks_events_log_reads_total", map[string]string{"reason": "gap"}),
		c.metric("tasks_events_log_reads_total", map[string]string{"reason": "resync"}), c.metric("tasks_events_duplicates_total", nil),
		c.metric("tasks_events_listener_reconnects_total", nil))
	if sent.Load() != changes {
		t.Errorf("sent %d changes, want %d", sent.Load(), changes)
	}
	if gotTotal != total || outOfOrder != 0 || lost != 0 || dups != 0 || wrongTask != 0 {
		t.Errorf("want every event exactly once and in order: received %d of %d, out of order %d, lost %d, duplicates %d, tasks out of order %d",
			gotTotal, total, outOfOrder, lost, dups, wrongTask)
	}
}

// try sends a request and returns the task it answers, if any, and the
// status; a transport error is status 0. Unlike do, it may run outside
// the test's goroutine.
func (c *client) try(method, path string, body any) (tasks.Task, int) {
	var t tasks.Task
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.e.srv.URL+path, rd)
	if err != nil {
		return t, 0
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := httpClient.Do(req)
	if err != nil {
		return t, 0
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 {
		json.NewDecoder(resp.Body).Decode(&t)
	}
	io.Copy(io.Discard, resp.Body)
	return t, resp.StatusCode
}

// readSeqs reads n events from conn and returns their sequences.
func readSeqs(t *testing.T, conn *websocket.Conn, n int) []int64 {
	t.Helper()
	var out []int64
	for range n {
		out = append(out, readEvent(t, conn).Seq)
	}
	return out
}

// closeOf reads conn until it closes and returns the close error.
func closeOf(t *testing.T, conn *websocket.Conn) websocket.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("read: %v, want a close", err)
			}
			return ce
		}
		t.Logf("before the close: %s", b)
	}
}

// dialAfter opens c's WebSocket with ?after_seq=query.
func (c *client) dialAfter(t *testing.T, query string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(c.e.srv.URL, "http") + "/v1/ws?after_seq=" + query
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + c.token}}})
	if err == nil {
		t.Cleanup(func() { conn.CloseNow() })
	}
	return conn, resp, err
}

// A device resumes after the last event it received: the events after
// it come from the log, then live ones, each once. A number past the
// account's last event, or one whose successors the retention deleted,
// is answered with close 4002 (list your tasks again); without the event
// log, after_seq is refused before the upgrade.
func TestEventsResume(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) { onEventLog(c); c.EventRetention = 400 * time.Millisecond })
	alice := e.signup("alice@example.com")
	live := alice.dialWS(t, false)
	for i := range 3 {
		alice.createTask(map[string]any{"title": fmt.Sprint(i)})
	}
	if got := readSeqs(t, live, 3); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("live seqs %v, want [1 2 3]", got)
	}

	resumed, _, err := alice.dialAfter(t, "1")
	if err != nil {
		t.Fatal(err)
	}
	alice.createTask(map[string]any{"title": "after the resume"})
	if got := readSeqs(t, resumed, 3); fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("resumed after 1: seqs %v, want [2 3 4] (2 and 3 from the log, 4 live)", got)
	}

	ahead, _, err := alice.dialAfter(t, "99")
	if err != nil {
		t.Fatal(err)
	}
	if ce := closeOf(t, ahead); ce.Code != tasks.StatusResyncNeeded || !strings.Contains(ce.Reason, "list your tasks") {
		t.Errorf("after_seq past the last event: close %v, want %d telling to list the tasks", ce, tasks.StatusResyncNeeded)
	}

	// The retention (400 ms here) deletes the four events.
	testkit.Eventually(t, 30*time.Second, "the retention to empty the event log", func() bool { return e.count("task_events") == 0 })
	old, _, err := alice.dialAfter(t, "2")
	if err != nil {
		t.Fatal(err)
	}
	if ce := closeOf(t, old); ce.Code != tasks.StatusResyncNeeded || !strings.Contains(ce.Reason, "no longer kept") {
		t.Errorf("after_seq older than the retention: close %v, want %d, no longer kept", ce, tasks.StatusResyncNeeded)
	}
	if n := e.metric("tasks_events_resume_refused_total", nil); n != 2 {
		t.Errorf("tasks_events_resume_refused_total = %v, want 2", n)
	}
	// Numbers never restart: the next event is 5.
	fresh := alice.dialWS(t, false)
	alice.createTask(map[string]any{"title": "after the retention"})
	if got := readSeqs(t, fresh, 1); got[0] != 5 {
		t.Errorf("the first event after the retention has seq %d, want 5", got[0])
	}

	for _, q := range []string{"-1", "x", "1&after_seq=2"} {
		if _, resp, err := alice.dialAfter(t, q); err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("after_seq=%s: %v %v, want 400", q, err, resp)
		}
	}
	t.Run("refused without the event log", func(t *testing.T) {
		e := newEnv(t, nil)
		bob := e.signup("bob@example.com")
		_, resp, err := bob.dialAfter(t, "0")
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("after_seq under --events local: %v %v, want 400", err, resp)
		}
		var body struct{ Error string }
		if json.NewDecoder(resp.Body).Decode(&body); body.Error != "no_event_log" {
			t.Errorf("error %q, want no_event_log", body.Error)
		}
		// The report's setup writes nothing beside the change, and its
		// events carry no seq.
		ws := bob.dialWS(t, false)
		bob.createTask(map[string]any{"title": "local"})
		if ev := readEvent(t, ws); ev.Seq != 0 || ev.Type != tasks.EventCreated {
			t.Errorf("event under --events local: %+v, want task.created without a seq", ev)
		}
		if n := e.count("task_events") + e.count("task_event_seqs"); n != 0 {
			t.Errorf("--events local wrote %d event log rows, want none", n)
		}
	})
}

// An event too large for a NOTIFY payload (a description of 4,000
// three-byte characters) is announced without its body: the instance
// reads it from the log, and the device gets it whole, in order.
func TestEventsLargerThanNotify(t *testing.T) {
	e := newEnv(t, onEventLog)
	alice := e.signup("alice@example.com")
	ws := alice.dialWS(t, false)
	long := strings.Repeat("€", tasks.MaxDescription)
	alice.createTask(map[string]any{"title": "small"})
	big := alice.createTask(map[string]any{"title": "big", "description": long})
	alice.createTask(map[string]any{"title": "small again"})
	for want := int64(1); want <= 3; want++ {
		ev := readEvent(t, ws)
		if ev.Seq != want {
			t.Fatalf("event seq %d, want %d", ev.Seq, want)
		}
		if ev.TaskID == big.ID && (ev.Task == nil || ev.Task.Description != long) {
			t.Fatalf("the large event lost its description")
		}
	}
}

// While an instance cannot reach Postgres, its listener hears nothing;
// once it reconnects, its sockets read from the log what was committed
// meanwhile through the other instance, though nothing came after.
func TestEventsAfterListenerOutage(t *testing.T) {
	dsn := newDatabase(t)
	viaProxy, proxy := testkit.ProxyURL(t, dsn)
	// One deployment: the audience is set, not taken from the DSNs,
	// which differ by the proxy's port.
	cfg := func(c *tasks.Config) { onEventLog(c); c.TokenAudience = "one deployment" }
	a := newEnvOn(t, viaProxy, cfg)
	b := newEnvOn(t, dsn, cfg)
	alice := b.signup("alice@example.com")
	// The device resumes as a phone does, should its socket close.
	d := &device{user: &client{e: a, token: alice.token, id: alice.id}, base: "ws" + strings.TrimPrefix(a.srv.URL, "http")}
	ctx, stop := context.WithCancel(context.Background())
	var reader sync.WaitGroup
	defer func() { stop(); reader.Wait() }()
	conn, err := d.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reader.Go(func() { d.run(ctx, conn) })
	// The socket is in place once it has an event.
	alice.createTask(map[string]any{"title": "before"})
	testkit.Eventually(t, 30*time.Second, "the first event on instance a", func() bool { return d.count() == 1 })

	proxy.SetDown(true) // resets the listener's connection, refuses new ones
	testkit.Eventually(t, 30*time.Second, "instance a's listener to notice", func() bool { return a.metric("tasks_events_listener_up", nil) == 0 })
	for i := range 5 {
		alice.createTask(map[string]any{"title": fmt.Sprint(i)})
	}
	proxy.SetDown(false)
	testkit.Eventually(t, 30*time.Second, "the 5 events on instance a", func() bool { return d.count() >= 6 })
	testkit.Eventually(t, 30*time.Second, "instance a's listener to reconnect", func() bool {
		return a.metric("tasks_events_listener_reconnects_total", nil) >= 1
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	var seqs []int64
	for _, ev := range d.got {
		seqs = append(seqs, ev.Seq)
	}
	t.Logf("received %v; the socket closed %d times", seqs, len(d.closes))
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6]" {
		t.Fatalf("seqs on instance a after its outage: %v, want [1 2 3 4 5 6]", seqs)
	}
}

// A listener connection that goes silent without a reset (a dead network
// path: every byte dropped, nothing closed) is found by its ping and
// replaced once the path is back; the socket then reads what it missed.
func TestEventsAfterSilentListener(t *testing.T) {
	dsn := newDatabase(t)
	viaProxy, proxy := testkit.ProxyURL(t, dsn)
	cfg := func(c *tasks.Config) {
		onEventLog(c)
		c.TokenAudience = "one deployment"
		tasks.ListenerPing(c, 500*time.Millisecond)
	}
	a := newEnvOn(t, viaProxy, cfg)
	b := newEnvOn(t, dsn, cfg)
	alice := b.signup("alice@example.com")
	onA := (&client{e: a, token: alice.token, id: alice.id}).dialWS(t, false)
	alice.createTask(map[string]any{"title": "before"})
	if got := readSeqs(t, onA, 1); got[0] != 1 {
		t.Fatalf("first seq %d, want 1", got[0])
	}

	proxy.SetBlackHole(true)
	testkit.Eventually(t, 30*time.Second, "instance a's listener to find its connection silent", func() bool {
		return a.metric("tasks_events_listener_up", nil) == 0
	})
	for i := range 3 {
		alice.createTask(map[string]any{"title": fmt.Sprint(i)})
	}
	proxy.SetBlackHole(false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []int64
	for range 3 {
		_, b, err := onA.Read(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		var ev received
		json.Unmarshal(b, &ev)
		got = append(got, ev.Seq)
	}
	if fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("seqs on instance a after the silent spell: %v, want [2 3 4]", got)
	}
}
