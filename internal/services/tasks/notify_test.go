package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// sink is a webhook that records the notifications of the batches it
// receives; fail makes the next answers 500.
type sink struct {
	*httptest.Server
	mu      sync.Mutex
	got     []tasks.Notification
	batches int
	bodies  []body // every call's, refused or not
	fail    atomic.Int32
	calls   atomic.Int32
	limit   atomic.Int64  // when set, a longer body is refused with 413, as a proxy in front of a push relay would
	block   chan struct{} // when set, every call waits for it to close
}

// body is what one call carried.
type body struct{ size, notifications int }

func newSink(t *testing.T, block bool) *sink {
	s := &sink{}
	if block {
		s.block = make(chan struct{})
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		if s.block != nil {
			select {
			case <-s.block:
			case <-r.Context().Done():
				return
			}
		}
		if s.fail.Add(-1) >= 0 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		var batch tasks.Batch
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &batch); err != nil || len(batch.Notifications) == 0 || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad notification batch", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, body{len(b), len(batch.Notifications)})
		s.mu.Unlock()
		if l := s.limit.Load(); l > 0 && int64(len(b)) > l {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		s.mu.Lock()
		s.got = append(s.got, batch.Notifications...)
		s.batches++
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		if s.block != nil {
			select {
			case <-s.block:
			default:
				close(s.block)
			}
		}
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

func (s *sink) notifications() []tasks.Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]tasks.Notification(nil), s.got...)
}

func TestNotificationsReachTheWebhook(t *testing.T) {
	for _, mode := range []struct {
		name           string
		perJob, outbox bool
	}{{"queue", false, false}, {"goroutine per job", true, false}, {"outbox", false, true}} {
		t.Run(mode.name, func(t *testing.T) {
			hook := newSink(t, false)
			e := newEnv(t, func(c *tasks.Config) {
				c.WebhookURL = hook.URL
				c.NotifyBackoff = time.Millisecond
				c.Deopt.GoroutinePerJob = mode.perJob
				c.NotifyOutbox = mode.outbox
			})
			c := e.signup("pushed@example.com")
			nobody := e.signup("nodevice@example.com")
			for _, tok := range []string{"apns-a", "fcm-b"} {
				platform := map[string]string{"apns-a": "ios", "fcm-b": "android"}[tok]
				if a := c.do("POST", "/v1/devices", map[string]string{"platform": platform, "push_token": tok}); a.code != 201 {
					t.Fatal(a)
				}
			}
			hook.fail.Store(1) // the first call fails and is retried
			task := c.createTask(map[string]any{"title": "push me"})
			testkit.Eventually(t, 15*time.Second, "the notification", func() bool { return len(hook.notifications()) == 1 })
			n := hook.notifications()[0]
			if n.UserID != c.id || n.Event.Type != tasks.EventCreated || n.Event.TaskID != task.ID || len(n.Devices) != 2 ||
				n.Devices[0].PushToken != "apns-a" || n.Devices[1].PushToken != "fcm-b" {
				t.Fatalf("notification = %+v", n)
			}
			if got := e.metric("tasks_notify_attempts_total", nil); got != 2 {
				t.Fatalf("webhook attempts = %v, want 2 (one retry)", got)
			}
			nobody.createTask(map[string]any{"title": "nobody to tell"})
			testkit.Eventually(t, 15*time.Second, "the job without devices", func() bool {
				return e.metric("tasks_notify_jobs_total", map[string]string{"result": "no_devices"}) == 1
			})
			if got := e.metric("tasks_notify_jobs_total", map[string]string{"result": "delivered"}); got != 1 {
				t.Fatalf("delivered = %v, want 1", got)
			}
		})
	}
}

// A full notification queue drops and counts the job; the request that
// made it answers as usual. The webhook here never answers while the
// requests run, so a request that waited for the queue would never end.
func TestFullQueueNeverBlocksARequest(t *testing.T) {
	hook := newSink(t, true)
	e := newEnv(t, func(c *tasks.Config) {
		c.WebhookURL = hook.URL
		c.QueueSize = 2
		c.Workers = 1
		c.NotifyTimeout = time.Minute
	})
	c := e.signup("busy@example.com")
	c.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "w"})
	// The first job takes the only worker, which the webhook then holds.
	c.createTask(map[string]any{"title": "first"})
	testkit.Eventually(t, 15*time.Second, "the worker busy", func() bool { return hook.calls.Load() == 1 })

	const n = 19
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan int, n)
	go func() {
		for i := range n {
			done <- c.do("POST", "/v1/tasks", map[string]any{"title": fmt.Sprint("t", i)}).code
		}
	}()
	for range n {
		select {
		case code := <-done:
			if code != http.StatusCreated {
				t.Fatalf("create while the queue is full = %d", code)
			}
		case <-ctx.Done():
			t.Fatal("a request waited for the full notification queue")
		}
	}
	// Two jobs fill the queue; the rest are dropped.
	if got := e.metric("tasks_notify_jobs_total", map[string]string{"result": "dropped"}); got != n-2 {
		t.Fatalf("dropped jobs = %v, want %d", got, n-2)
	}
	if got := e.metric("tasks_notify_queue_depth", nil); got != 2 {
		t.Fatalf("queue depth = %v, want 2 (its capacity)", got)
	}
	close(hook.block)
	testkit.Eventually(t, 15*time.Second, "the queued jobs delivered", func() bool { return len(hook.notifications()) == 3 })
}

// Changes queued while the webhook is busy go out together: one call
// carries the notifications of many changes, of several users.
func TestNotificationsAreBatched(t *testing.T) {
	hook := newSink(t, true)
	e := newEnv(t, func(c *tasks.Config) {
		c.WebhookURL = hook.URL
		c.Workers = 1
		c.NotifyTimeout = time.Minute
	})
	a, b := e.signup("batch-a@example.com"), e.signup("batch-b@example.com")
	for _, c := range []*client{a, b} {
		if r := c.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "w"}); r.code != 201 {
			t.Fatal(r)
		}
	}
	a.createTask(map[string]any{"title": "first"})
	testkit.Eventually(t, 15*time.Second, "the worker busy", func() bool { return hook.calls.Load() == 1 })
	const queued = 10
	for i := range queued {
		[]*client{a, b}[i%2].createTask(map[string]any{"title": fmt.Sprint("queued ", i)})
	}
	close(hook.block)
	testkit.Eventually(t, 15*time.Second, "every notification", func() bool { return len(hook.notifications()) == 1+queued })
	if got := hook.calls.Load(); got != 2 {
		t.Fatalf("webhook calls = %d, want 2 (the first change, then the %d queued ones in one batch)", got, queued)
	}
	users := map[int64]int{}
	for _, n := range hook.notifications() {
		users[n.UserID]++
	}
	if users[a.id] != 1+queued/2 || users[b.id] != queued/2 {
		t.Fatalf("notifications by user = %v", users)
	}
}

// One user cannot make a batch too large for the webhook, nor take other
// users' notifications down with theirs: devices per user are bounded
// and a token is registered once; a batch is bounded in bytes; and a 413
// fails only the notification the webhook refuses.
func TestOneUsersDevicesCannotSinkABatch(t *testing.T) {
	hook := newSink(t, true)
	hook.limit.Store(16 << 10)
	const maxBytes = 8 << 10
	e := newEnv(t, func(c *tasks.Config) {
		c.WebhookURL = hook.URL
		c.Workers = 1
		c.NotifyTimeout = time.Minute
		c.MaxDevicesPerUser = 5
		c.NotifyMaxBatchBytes = maxBytes
	})
	heavy := e.signup("heavy@example.com")
	token := func(i int) string { return fmt.Sprintf("%d-%s", i, strings.Repeat("x", tasks.MaxPushToken-8)) }
	var first tasks.Device
	for i := range 5 {
		a := heavy.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": token(i)})
		if a.code != http.StatusCreated {
			t.Fatalf("device %d: %s", i, a)
		}
		if i == 0 {
			a.decode(t, &first)
		}
	}
	if a := heavy.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": token(5)}); a.code != http.StatusConflict || a.err.Error != "too_many_devices" {
		t.Errorf("a 6th device: %s; want 409 too_many_devices", a)
	}
	var again tasks.Device
	if a := heavy.do("POST", "/v1/devices", map[string]string{"platform": "ios", "push_token": token(0)}); a.code != http.StatusOK {
		t.Errorf("a token registered again: %s; want 200, the same device", a)
	} else if a.decode(t, &again); again.ID != first.ID || again.Platform != "ios" {
		t.Errorf("a token registered again: %+v; want device %d, its platform updated", again, first.ID)
	}
	if n := e.count("devices"); n != 5 {
		t.Errorf("%d devices in the database; want 5", n)
	}

	light := []*client{e.signup("light-a@example.com"), e.signup("light-b@example.com"), e.signup("light-c@example.com")}
	for _, c := range light {
		if r := c.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "w-" + c.email}); r.code != 201 {
			t.Fatal(r)
		}
	}
	light[0].createTask(map[string]any{"title": "first"})
	testkit.Eventually(t, 15*time.Second, "the worker busy", func() bool { return hook.calls.Load() == 1 })
	// Queued while the webhook is busy: one batch of the heavy user's
	// change among the light users' ones.
	light[1].createTask(map[string]any{"title": "before"})
	heavy.createTask(map[string]any{"title": "heavy"})
	light[2].createTask(map[string]any{"title": "after"})
	close(hook.block)
	testkit.Eventually(t, 15*time.Second, "the light users' notifications", func() bool { return len(hook.notifications()) == 3 })
	testkit.Eventually(t, 15*time.Second, "the heavy one failed", func() bool {
		return e.metric("tasks_notify_jobs_total", map[string]string{"result": "failed"}) == 1
	})
	for _, n := range hook.notifications() {
		if n.UserID == heavy.id {
			t.Errorf("the heavy user's notification was delivered, over the webhook's limit")
		}
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	for _, b := range hook.bodies {
		if b.notifications > 1 && b.size > maxBytes {
			t.Errorf("a call of %d notifications carried %d bytes, over NotifyMaxBatchBytes %d", b.notifications, b.size, maxBytes)
		}
	}
}

// withDevice signs a user up with one device, ready to be notified.
func withDevice(t *testing.T, e *env, email string) *client {
	t.Helper()
	c := e.signup(email)
	if a := c.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "w-" + email}); a.code != http.StatusCreated {
		t.Fatal(a)
	}
	return c
}

// A webhook that answers with a redirect gets no second request: a 307
// would re-post every user's push tokens wherever it points.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	var stolen atomic.Int32
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stolen.Add(1) }))
	defer thief.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+"/collect", http.StatusTemporaryRedirect)
	}))
	defer hook.Close()
	e := newEnv(t, func(c *tasks.Config) { c.WebhookURL = hook.URL })
	withDevice(t, e, "redirected@example.com").createTask(map[string]any{"title": "where does it go"})
	testkit.Eventually(t, 15*time.Second, "the notification failed", func() bool {
		return e.metric("tasks_notify_jobs_total", map[string]string{"result": "failed"}) == 1
	})
	if n := stolen.Load(); n != 0 {
		t.Errorf("the redirect's target received %d requests with the users' push tokens", n)
	}
}

// With a webhook secret every request is signed, and the signature holds
// for its body and that secret only.
func TestWebhookSigned(t *testing.T) {
	secret := []byte("a webhook secret")
	var checked, bad atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sig := r.Header.Get(tasks.SignatureHeader)
		if tasks.VerifyWebhook(secret, sig, b, time.Now(), time.Minute) != nil ||
			tasks.VerifyWebhook([]byte("another secret"), sig, b, time.Now(), time.Minute) == nil ||
			tasks.VerifyWebhook(secret, sig, append(b, ' '), time.Now(), time.Minute) == nil ||
			tasks.VerifyWebhook(secret, sig, b, time.Now().Add(time.Hour), time.Minute) == nil {
			bad.Add(1)
		}
		checked.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	e := newEnv(t, func(c *tasks.Config) { c.WebhookURL, c.WebhookSecret = hook.URL, string(secret) })
	withDevice(t, e, "signed@example.com").createTask(map[string]any{"title": "signed"})
	testkit.Eventually(t, 15*time.Second, "the signed call", func() bool { return checked.Load() == 1 })
	if bad.Load() != 0 {
		t.Error("the request's signature did not hold for its body and secret, or held for another")
	}
}

// A token in the webhook URL's query stays out of the logs of failed
// calls.
func TestWebhookURLNotLogged(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there now: every call fails to connect
	var logs testkit.SyncBuffer
	e := newEnv(t, func(c *tasks.Config) {
		c.WebhookURL = dead.URL + "/push?token=SECRET-IN-QUERY"
		c.NotifyRetries = -1
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	withDevice(t, e, "logged@example.com").createTask(map[string]any{"title": "fails"})
	testkit.Eventually(t, 15*time.Second, "the failure logged", func() bool { return strings.Contains(logs.String(), "notifications failed") })
	if strings.Contains(logs.String(), "SECRET-IN-QUERY") {
		t.Errorf("the log shows the webhook URL's token: %s", logs.String())
	}
}
