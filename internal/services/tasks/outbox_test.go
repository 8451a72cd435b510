package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// tally is a webhook that counts how many times it received each task's
// notification. While holding, it counts what it receives, then holds
// the call unanswered, as a stalled push relay does, so that nothing is
// acknowledged.
type tally struct {
	*httptest.Server
	holding atomic.Bool
	calls   atomic.Int64
	mu      sync.Mutex
	seen    map[int64]int   // task id: times received
	ids     map[int64]int64 // notification id: its task id
}

func newTally(t *testing.T) *tally {
	w := &tally{seen: map[int64]int{}, ids: map[int64]int64{}}
	w.holding.Store(true)
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.calls.Add(1)
		var batch tasks.Batch
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &batch); err != nil {
			http.Error(rw, "bad batch", http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		for _, n := range batch.Notifications {
			w.seen[n.Event.TaskID]++
			w.ids[n.ID] = n.Event.TaskID
		}
		w.mu.Unlock()
		if w.holding.Load() {
			<-r.Context().Done() // the caller's timeout, or its death
			return
		}
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		w.CloseClientConnections()
		w.Close()
	})
	return w
}

// counts returns the tasks received at least once and every receipt.
func (w *tally) counts() (unique, receipts int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.seen {
		receipts += n
	}
	return len(w.seen), receipts
}

// TestOutboxSurvivesSIGKILL: with --notify-outbox, the service is
// SIGKILLed with 1,000 notifications pending (the webhook holding every
// call unanswered); after a restart every one is delivered, at least
// once. Those the webhook had received but not answered before the kill
// come again: duplicates, which at-least-once allows and the test counts.
func TestOutboxSurvivesSIGKILL(t *testing.T) {
	const changes = 1000
	hook := newTally(t)
	dsn := newDatabase(t)
	args := []string{"--notify-outbox", "--webhook-url", hook.URL, "--notify-timeout", "500ms", "--notify-outbox-poll", "200ms"}
	svc := startChild(t, dsn, args...)
	e := &env{t: t, srv: &httptest.Server{URL: svc.url}, dsn: dsn}
	db, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	e.db = db
	alice := e.signup("crash@example.com")
	if a := alice.do("POST", "/v1/devices", map[string]string{"platform": "ios", "push_token": "apns-crash"}); a.code != http.StatusCreated {
		t.Fatal(a)
	}

	created := make([]int64, changes)
	var wg sync.WaitGroup
	errs := make(chan error, changes)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < changes; i += 8 {
				id, err := createTask(svc.url, alice.token, fmt.Sprintf("task %d", i))
				if err != nil {
					errs <- err
					return
				}
				created[i] = id
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	pending := func() int {
		return e.countWhere("notify_outbox", "failed_at IS NULL")
	}
	if n := pending(); n != changes {
		t.Fatalf("%d notifications pending in the outbox before the kill, want %d", n, changes)
	}
	testkit.Eventually(t, 30*time.Second, "the webhook holding calls", func() bool { return hook.calls.Load() > 0 })
	heldUnique, heldReceipts := hook.counts()
	svc.kill(t)
	if n := pending(); n != changes {
		t.Fatalf("%d notifications pending after SIGKILL, want all %d", n, changes)
	}

	hook.holding.Store(false)
	svc = startChild(t, dsn, args...)
	testkit.Eventually(t, 90*time.Second, "every notification delivered after the restart", func() bool {
		unique, _ := hook.counts()
		return unique == changes && e.count("notify_outbox") == 0
	})
	unique, receipts := hook.counts()
	for _, id := range created {
		hook.mu.Lock()
		n := hook.seen[id]
		hook.mu.Unlock()
		if n == 0 {
			t.Errorf("task %d's notification never arrived", id)
		}
	}
	hook.mu.Lock()
	ids := len(hook.ids)
	_, zero := hook.ids[0]
	hook.mu.Unlock()
	if ids != changes || zero {
		t.Errorf("%d distinct notification ids (a zero one: %v), want %d: one per notification, the same on each delivery", ids, zero, changes)
	}
	duplicates := receipts - unique
	t.Logf("sent %d, delivered %d, receipts %d, duplicates %d, lost %d; before the kill the webhook held %d calls carrying %d notifications (%d distinct)",
		changes, unique, receipts, duplicates, changes-unique, hook.calls.Load(), heldReceipts, heldUnique)
	if duplicates < heldUnique {
		t.Errorf("%d duplicates, want at least the %d notifications received but never answered before the kill", duplicates, heldUnique)
	}
	if n := e.countWhere("notify_outbox", "failed_at IS NOT NULL"); n != 0 {
		t.Errorf("%d notifications kept as failed, want none", n)
	}
	e.admin = svc.admin
	testkit.Eventually(t, 30*time.Second, "the pending gauge at 0", func() bool {
		return e.metric("tasks_notify_outbox_pending", nil) == 0
	})
}

// createTask creates a task through the API and returns its id; it may
// run outside the test's goroutine.
func createTask(url, token, title string) (int64, error) {
	b, _ := json.Marshal(map[string]string{"title": title})
	req, err := http.NewRequest("POST", url+"/v1/tasks", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var task tasks.Task
	if err := json.NewDecoder(resp.Body).Decode(&task); err != nil || resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("create %q: %s, %v", title, resp.Status, err)
	}
	return task.ID, nil
}

// countWhere returns the rows of a table that match cond.
func (e *env) countWhere(table, cond string) int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+cond).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestOutboxKeepsFailedRows: a notification the webhook keeps failing
// (5xx) is retried --notify-outbox-retries times, then kept in the table
// as failed with its last error, and counted; one the webhook refuses
// (4xx) is kept as failed at once. Neither is deleted.
func TestOutboxKeepsFailedRows(t *testing.T) {
	status := atomic.Int32{}
	status.Store(http.StatusServiceUnavailable)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(hook.Close)
	e := newEnv(t, func(c *tasks.Config) {
		c.WebhookURL = hook.URL
		c.NotifyOutbox = true
		c.NotifyOutboxRetries = 2
		c.NotifyBackoff = time.Millisecond
	})
	alice := e.signup("failing@example.com")
	alice.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "w"})
	failed := func() float64 { return e.metric("tasks_notify_jobs_total", map[string]string{"result": "failed"}) }

	alice.createTask(map[string]any{"title": "the webhook is down"})
	testkit.Eventually(t, 30*time.Second, "the notification kept as failed", func() bool { return failed() == 1 })
	var attempts int
	var lastError string
	if err := e.db.QueryRow(context.Background(), `SELECT attempts, last_error FROM notify_outbox WHERE failed_at IS NOT NULL`).Scan(&attempts, &lastError); err != nil {
		t.Fatal(err)
	}
	if attempts != 3 || lastError != "webhook answered 503 Service Unavailable" {
		t.Fatalf("failed row: %d attempts, last error %q; want 3 (the first and 2 retries), the webhook's 503", attempts, lastError)
	}
	if got := e.metric("tasks_notify_jobs_total", map[string]string{"result": "retried"}); got != 2 {
		t.Fatalf("retried = %v, want 2", got)
	}

	status.Store(http.StatusBadRequest)
	alice.createTask(map[string]any{"title": "the webhook refuses it"})
	testkit.Eventually(t, 30*time.Second, "the refused notification kept as failed", func() bool { return failed() == 2 })
	if n := e.countWhere("notify_outbox", "failed_at IS NOT NULL AND attempts = 1"); n != 1 {
		t.Fatalf("%d rows failed after one attempt, want the refused one", n)
	}
	if n := e.count("notify_outbox"); n != 2 {
		t.Fatalf("%d rows in the outbox, want both failed ones kept", n)
	}
	testkit.Eventually(t, 30*time.Second, "the failed gauge at 2", func() bool { return e.metric("tasks_notify_outbox_failed", nil) == 2 })
}

// TestOutboxTwoInstances: two instances deliver from one outbox while
// both run, their claims passing each other (SKIP LOCKED): every
// notification of changes made through both arrives exactly once.
func TestOutboxTwoInstances(t *testing.T) {
	const changes = 400
	hook := newTally(t)
	hook.holding.Store(false)
	dsn := newDatabase(t)
	cfg := func(c *tasks.Config) {
		c.WebhookURL = hook.URL
		c.NotifyOutbox = true
		c.Workers = 4
		// Leases far longer than the test, so that however slow the
		// machine, no lease ends and a copy is never the lease's doing.
		c.NotifyTimeout = time.Minute
	}
	a, b := newEnvOn(t, dsn, cfg), newEnvOn(t, dsn, cfg)
	alice := a.signup("two@example.com")
	alice.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "w"})
	var wg sync.WaitGroup
	errs := make(chan error, changes)
	for i := range changes {
		url := []string{a.srv.URL, b.srv.URL}[i%2]
		wg.Go(func() {
			if _, err := createTask(url, alice.token, fmt.Sprintf("task %d", i)); err != nil {
				errs <- err
			}
		})
		if i%16 == 15 {
			wg.Wait() // sixteen at a time
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "every notification delivered", func() bool {
		unique, _ := hook.counts()
		return unique == changes && a.count("notify_outbox") == 0
	})
	unique, receipts := hook.counts()
	t.Logf("sent %d through two instances, delivered %d, duplicates %d", changes, unique, receipts-unique)
	if receipts != changes {
		t.Fatalf("%d receipts of %d notifications, want each exactly once while both instances run", receipts, changes)
	}
	if got := a.metric("tasks_notify_jobs_total", map[string]string{"result": "delivered"}) +
		b.metric("tasks_notify_jobs_total", map[string]string{"result": "delivered"}); got != changes {
		t.Fatalf("the instances count %v delivered, want %d", got, changes)
	}
}

// TestOutboxUnreadableRow: a row whose event cannot be decoded (written
// by another version) is kept as failed, and the rows beside it are
// delivered; it does not block the outbox.
func TestOutboxUnreadableRow(t *testing.T) {
	hook := newTally(t)
	hook.holding.Store(false)
	e := newEnv(t, func(c *tasks.Config) {
		c.WebhookURL = hook.URL
		c.NotifyOutbox = true
	})
	alice := e.signup("unreadable@example.com")
	alice.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "w"})
	if _, err := e.db.Exec(context.Background(), `INSERT INTO notify_outbox (user_id, event) VALUES ($1, '{"task_id": "not a number"}')`, alice.id); err != nil {
		t.Fatal(err)
	}
	task := alice.createTask(map[string]any{"title": "beside it"})
	testkit.Eventually(t, 30*time.Second, "the good row delivered, the bad one failed", func() bool {
		unique, _ := hook.counts()
		return unique == 1 && e.countWhere("notify_outbox", "failed_at IS NOT NULL") == 1
	})
	if _, receipts := hook.counts(); receipts != 1 || hook.seen[task.ID] != 1 {
		t.Fatalf("webhook saw %v, want task %d once", hook.seen, task.ID)
	}
}
