package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/eventlog"
	"github.com/highload-lab/hlab/internal/services/eventlog/eventlogtest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// helperEnv, when set, makes the test binary a consumer process (for the
// crash test): it consumes from the brokers, topic and group in the
// variable ("brokers|topic|group") and prints each processed event id on
// stdout, until killed. It polls up to 1,000 events at once and takes
// 5 ms more per event, so that a kill lands in the middle of a batch it
// has not committed.
const helperEnv = "APP_TEST_HELPER_CONSUMER"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(helperConsumer(v))
	}
	os.Exit(depstest.Run(m))
}

func helperConsumer(spec string) int {
	parts := strings.Split(spec, "|")
	var mu sync.Mutex
	c, err := eventlog.NewConsumer(eventlog.ConsumerConfig{
		Brokers: strings.Split(parts[0], ","), Topic: parts[1], Group: parts[2],
		SessionTimeout: 6 * time.Second,
		MaxPollRecords: 1000, FetchMaxBytes: 1 << 20,
		Processed: func(ev eventlog.Event) {
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			fmt.Fprintln(os.Stdout, ev.ID) // unbuffered: printed before the commit
			mu.Unlock()
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := c.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// testApp is an app served by httptest, with its metrics.
type testApp struct {
	*App
	URL string
	reg *prometheus.Registry
}

func startApp(t testing.TB, cfg Config) *testApp {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.Handler(server.Config{Name: "app", Registry: reg, Ready: a.Ready}, a.Handler()))
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	return &testApp{App: a, URL: srv.URL, reg: reg}
}

func (a *testApp) metric(t testing.TB, name string) float64 {
	return testkit.MetricSum(t, a.reg, name, nil)
}

// answer is one GET /handle as the client saw it.
type answer struct {
	code    int
	id      string // X-Event-Id
	failure string // X-Failure
	dropped string // X-Event-Dropped
	err     error
}

var client = &http.Client{Timeout: 10 * time.Second}

func get(url string) answer {
	resp, err := client.Get(url)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return answer{
		code: resp.StatusCode, id: resp.Header.Get(eventlog.IDHeader),
		failure: resp.Header.Get("X-Failure"), dropped: resp.Header.Get("X-Event-Dropped"),
	}
}

// load sends GET /handle from workers, each every interval, until stopped,
// and keeps every answer.
type load struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	ok   []string       // ids answered 200
	fail map[string]int // 503s by X-Failure
	odd  []string       // anything else: must stay empty
}

func startLoad(url string, workers int, interval time.Duration) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel, fail: map[string]int{}}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				a := get(url + "/handle")
				l.mu.Lock()
				switch {
				case a.err == nil && a.code == 200 && a.id != "":
					l.ok = append(l.ok, a.id)
				case a.err == nil && a.code == 503 && a.failure != "":
					l.fail[a.failure]++
				default:
					l.odd = append(l.odd, fmt.Sprintf("status %d id %q err %v", a.code, a.id, a.err))
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// finish stops the load and waits for the answers in flight.
func (l *load) finish() {
	l.stop()
	l.wg.Wait()
}

func (l *load) counts() (ok, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.fail {
		failed += n
	}
	return len(l.ok), failed
}

// startHelperConsumer runs a consumer as a child process (this test
// binary) whose processed ids go to tr; kill ends it with SIGKILL.
func startHelperConsumer(t testing.TB, brokers []string, topic, group string, tr *eventlogtest.Tracker) (kill func()) {
	t.Helper()
	cmd, out := testkit.StartSelf(t, helperEnv+"="+strings.Join(brokers, ",")+"|"+topic+"|"+group)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			tr.AddID(strings.TrimSpace(sc.Text()))
		}
	}()
	var once sync.Once
	kill = func() {
		once.Do(func() {
			cmd.Process.Kill()
			<-read
			cmd.Wait()
		})
	}
	t.Cleanup(kill)
	return kill
}

// heapSampler keeps the largest Go heap (live and unswept objects) of
// this process seen every 50 ms.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	max  uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(h.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			rtmetrics.Read(s)
			h.max = max(h.max, s[0].Value.Uint64())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// Stop returns the largest heap seen, in MB.
func (h *heapSampler) Stop() float64 {
	close(h.stop)
	<-h.done
	return float64(h.max) / (1 << 20)
}
