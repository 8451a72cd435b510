package crudexp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/coder/websocket"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/tasksload"
)

// The row of our own beside the report's: task events across two
// instances of the task API on --events postgres (the report's API runs
// as one process and tells only its own WebSockets).
const (
	deliveryKey   labresult.Key = "ours/events-two-instances"
	deliveryLabel               = "ours: task events across two instances (--events postgres), 200 changes/s through one, received on the other"
	// deliveryRate is the fixed rate of changes, well under what one
	// instance serves, so that the row measures the event path, not a
	// saturated API.
	deliveryRate = 200
	// deliveryGrace is how long after the last change its event may still
	// arrive before it counts as lost.
	deliveryGrace = 5 * time.Second
	// deliveryInFlight bounds the changes waiting for their answer.
	deliveryInFlight = 64
	// deliveryMarker starts the title each change sets: the receiving
	// devices find the change's number in it.
	deliveryMarker = "delivery-"
)

// deliveryDuration is how long the changes run: the rows' run duration
// (a second in the lab's own tests).
func deliveryDuration(o lab.Options) time.Duration {
	if o.Short {
		return time.Second
	}
	run, _, _ := timing(o)
	return run
}

// deliveryRow runs two instances with --events postgres on the database
// with the indexes, under the report's quota each, with one WebSocket per
// account on each. Changes (a PATCH of the account's task, its title
// numbered) go through the first at deliveryRate for the run's duration;
// the devices on the second time each event from the change's intended
// send time to its receipt. An acknowledged change whose event never
// reaches the second instance's device of its account is lost.
func (b *bench) deliveryRow(ctx context.Context) error {
	b.run.Progress.Step(deliveryLabel+": start two instances", 6*time.Second)
	var svcs []*lab.Service
	defer func() {
		for _, svc := range svcs {
			svc.Stop()
		}
	}()
	for range 2 {
		cfg := b.taskConfig(on)
		cfg.Events = tasks.EventsPostgres
		o := tasks.Options{Config: cfg, SecretFile: b.secret, LogFormat: "json", PublicMetrics: true}
		svc, err := b.run.StartCommand(ctx, "tasks", serviceCPU, serviceMemMB, o.Command())
		if err != nil {
			return err
		}
		svcs = append(svcs, svc)
	}
	writer, reader := svcs[0], svcs[1]
	accounts := b.sc.Users
	tasksOf, err := b.deliveryTasks(ctx, writer.URL(""), accounts)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	far, err := listen(ctx, reader.Addr, b.sc, accounts)
	if err != nil {
		return err
	}
	near, err := listen(ctx, writer.Addr, b.sc, accounts)
	if err != nil {
		return err
	}
	d := deliveryDuration(b.run.Opts)
	b.run.Progress.Step(deliveryLabel, d+deliveryGrace)
	sent := b.deliveryChanges(ctx, writer.URL(""), tasksOf, d)
	acked := sent.acked
	far.await(acked, deliveryGrace)
	near.await(acked, time.Second)
	stop()
	far.wait()
	near.wait()
	b.rows[deliveryKey] = deliveryRowOf(sent, far, near)
	return nil
}

// deliveryTasks makes one task per account through the instance at base
// and returns their ids by account.
func (b *bench) deliveryTasks(ctx context.Context, base string, accounts int) ([]int64, error) {
	ids := make([]int64, accounts)
	for i := range accounts {
		var t tasks.Task
		code, err := call(ctx, http.MethodPost, base+"/v1/tasks", b.sc.Token(i), map[string]any{"title": "delivery"}, &t)
		if err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("crud: create the delivery row's task of account %d: %d %v", i, code, err)
		}
		ids[i] = t.ID
	}
	return ids, nil
}

// changes are the delivery row's changes: when they started, how many
// were sent, which were acknowledged (200), by number, and the answers.
type changes struct {
	start  time.Time
	sent   int64
	acked  map[int]bool
	codes  map[string]int64
	errors int64
}

// deliveryChanges sends a PATCH of change n's account's task at start +
// n/deliveryRate for d.
func (b *bench) deliveryChanges(ctx context.Context, base string, tasksOf []int64, d time.Duration) *changes {
	n := int(deliveryRate * d.Seconds())
	c := &changes{acked: make(map[int]bool, n), codes: map[string]int64{}, start: time.Now()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, deliveryInFlight)
	for i := range n {
		if wait := time.Until(intended(c.start, i)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return c
		}
		c.sent++
		wg.Go(func() {
			defer func() { <-slots }()
			acc := i % len(tasksOf)
			code, err := call(ctx, http.MethodPatch, fmt.Sprintf("%s/v1/tasks/%d", base, tasksOf[acc]), b.sc.Token(acc),
				map[string]any{"title": deliveryMarker + strconv.Itoa(i)}, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				c.errors++
			case code == http.StatusOK:
				c.acked[i] = true
				fallthrough
			default:
				c.codes[strconv.Itoa(code)]++
			}
		})
	}
	return c
}

// intended is when change n is due.
func intended(start time.Time, n int) time.Time {
	return start.Add(time.Duration(n) * time.Second / deliveryRate)
}

var deliveryClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: deliveryInFlight}}

// call sends a JSON request with token and decodes a 2xx answer into out.
func call(ctx context.Context, method, url, token string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := deliveryClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode, err
}

// receipts are the delivery row's devices on one instance, one per
// account, and when each change's event first reached one of them.
type receipts struct {
	mu   sync.Mutex
	at   map[int]time.Time
	wg   sync.WaitGroup
	errs []error
}

// listen opens a WebSocket per account on the instance at addr, each
// from the account's first event (?after_seq=0), so that none opened
// after a change misses it.
func listen(ctx context.Context, addr string, sc *tasksload.Scenario, accounts int) (*receipts, error) {
	r := &receipts{at: map[int]time.Time{}}
	for i := range accounts {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, _, err := websocket.Dial(dctx, "ws://"+addr+"/v1/ws?after_seq=0", &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + sc.Token(i)}},
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("crud: delivery row: WebSocket of account %d on %s: %w", i, addr, err)
		}
		r.wg.Go(func() { r.read(ctx, conn) })
	}
	return r, nil
}

func (r *receipts) read(ctx context.Context, conn *websocket.Conn) {
	defer conn.CloseNow()
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.mu.Lock()
				r.errs = append(r.errs, err)
				r.mu.Unlock()
			}
			return
		}
		now := time.Now()
		var ev tasks.Event
		if json.Unmarshal(b, &ev) != nil || ev.Task == nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(ev.Task.Title, deliveryMarker))
		if err != nil || !strings.HasPrefix(ev.Task.Title, deliveryMarker) {
			continue
		}
		r.mu.Lock()
		if _, ok := r.at[n]; !ok {
			r.at[n] = now
		}
		r.mu.Unlock()
	}
}

// await waits until every acknowledged change was received, or grace.
func (r *receipts) await(acked map[int]bool, grace time.Duration) {
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r.mu.Lock()
		missing := 0
		for n := range acked {
			if _, ok := r.at[n]; !ok {
				missing++
			}
		}
		r.mu.Unlock()
		if missing == 0 {
			return
		}
	}
}

func (r *receipts) wait() { r.wg.Wait() }

// delays returns the delays of the acknowledged changes' events, from
// their intended send time, and how many never came.
func (r *receipts) delays(start time.Time, acked map[int]bool) (*hdrhistogram.Histogram, int64) {
	h := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	var lost int64
	for n := range acked {
		at, ok := r.at[n]
		if !ok {
			lost++
			continue
		}
		h.RecordValue(max(1, at.Sub(intended(start, n)).Microseconds()))
	}
	return h, lost
}

// deliveryRowOf is the row: the far instance's delays and losses, with
// the near one's in its note.
func deliveryRowOf(c *changes, far, near *receipts) *labresult.Row {
	row := lab.NewRow(deliveryKey)
	row.Model, row.Rate, row.Requests, row.Runs = "open", deliveryRate, c.sent, 1
	row.SuccessBound = labresult.DefaultSuccessBound
	row.SuccessRatio = labresult.F(float64(len(c.acked)) / float64(max(c.sent, 1)))
	row.StatusCodes = c.codes
	if c.errors > 0 {
		row.Errors["transport"] = c.errors
	}
	start, sent, acked := c.start, c.sent, c.acked
	h, lost := far.delays(start, acked)
	ms := func(q float64) *float64 { return labresult.F(float64(h.ValueAtQuantile(q)) / 1000) }
	row.P50MS, row.P90MS, row.P99MS, row.MaxMS = ms(50), ms(90), ms(99), ms(100)
	row.MeanMS = labresult.F(h.Mean() / 1000)
	row.Lost = &lost
	row.Set(eventsReceived, float64(h.TotalCount()))
	nh, nlost := near.delays(start, acked)
	row.AddNote("%d changes sent through one instance at %d/s, %d acknowledged; on the other instance's devices %d events received, %d lost, delivery p50 %.1f ms, p99 %.1f ms "+
		"(from each change's intended send time, its request included); on the writing instance's own devices p50 %.1f ms, p99 %.1f ms, %d lost; socket errors: %d far, %d near",
		sent, deliveryRate, len(acked), h.TotalCount(), lost, *row.P50MS, *row.P99MS,
		float64(nh.ValueAtQuantile(50))/1000, float64(nh.ValueAtQuantile(99))/1000, nlost, len(far.errs), len(near.errs))
	return row
}
