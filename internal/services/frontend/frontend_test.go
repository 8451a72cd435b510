package frontend

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/internal/testkit"
)

// startBack serves a back with cfg on 127.0.0.1.
func startBack(t testing.TB, cfg backend.Config) (*backend.Service, string) {
	t.Helper()
	s, err := backend.New(cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL + "/"
}

// startFront serves a front with cfg on 127.0.0.1.
func startFront(t testing.TB, cfg Config) (*Front, string) {
	t.Helper()
	f, err := New(cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); f.Close() })
	return f, srv.URL + "/"
}

type reply struct {
	code    int
	body    string
	failure string
	took    time.Duration
}

func call(t testing.TB, url string) reply {
	t.Helper()
	start := time.Now()
	resp, body := testkit.Get(t, url)
	return reply{resp.StatusCode, body, resp.Header.Get("X-Failure"), time.Since(start)}
}

// blackHoleAddr returns a 127.0.0.1 address where connecting hangs
// (backend.ListenConnectHole), skipping t where none can be made.
func blackHoleAddr(t testing.TB) string {
	t.Helper()
	b, err := backend.ListenConnectHole()
	if errors.Is(err, backend.ErrNoConnectHole) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Addr()
}

func TestEveryPolicyPassesTheAnswer(t *testing.T) {
	_, back := startBack(t, backend.Config{Delay: time.Millisecond, BodyBytes: 40})
	for _, p := range Policies {
		t.Run(string(p), func(t *testing.T) {
			f, url := startFront(t, Config{Backend: back, Policy: p})
			a := call(t, url)
			if a.code != http.StatusOK || len(a.body) != 40 || !strings.HasPrefix(a.body, "hello") {
				t.Fatalf("%d %q", a.code, a.body)
			}
			if got := testutil.ToFloat64(f.requests.WithLabelValues("ok")); got != 1 {
				t.Errorf("frontend_requests_total{outcome=ok} = %v", got)
			}
		})
	}
}

// TestDisableKeepAlives: with DisableKeepAlives every call to the back
// opens a connection of its own, as Node's default agent did in report E;
// by default the front reuses one.
func TestDisableKeepAlives(t *testing.T) {
	for _, tt := range []struct {
		off  bool
		want int64
	}{{false, 1}, {true, 3}} {
		back, err := backend.New(backend.Config{Delay: time.Millisecond}, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		var conns atomic.Int64
		srv := httptest.NewUnstartedServer(back)
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		_, url := startFront(t, Config{Backend: srv.URL + "/", DisableKeepAlives: tt.off})
		for range 3 {
			if a := call(t, url); a.code != http.StatusOK {
				t.Fatalf("status %d %q", a.code, a.body)
			}
		}
		if got := conns.Load(); got != tt.want {
			t.Errorf("keep-alives disabled %v: 3 calls opened %d connections to the back, want %d", tt.off, got, tt.want)
		}
	}
}

// TestTimeoutsHoldForEveryFailureMode: each way an outward call can hang
// ends within its own bound, with its own reason, for every policy that
// has timeouts. The overall deadline is long here so that the specific
// timeout is the one that acts.
func TestTimeoutsHoldForEveryFailureMode(t *testing.T) {
	const bound = 300 * time.Millisecond
	const slack = 2 * time.Second // scheduling on a busy machine; far below the 10 s deadline
	blackHole := "http://" + blackHoleAddr(t) + "/"
	_, slowHeaders := startBack(t, backend.Config{Delay: time.Minute})
	_, trickle := startBack(t, backend.Config{Mode: backend.Trickle, TrickleInterval: 50 * time.Millisecond, BodyBytes: 200})
	_, silent := startBack(t, backend.Config{Mode: backend.BlackHole})
	cases := []struct {
		name    string
		backend string
		cfg     Config
		kind    string
	}{
		{"connect to a black hole", blackHole, Config{ConnectTimeout: bound}, "connect_timeout"},
		{"slow headers", slowHeaders, Config{HeaderTimeout: bound}, "header_timeout"},
		{"accepted, never answered", silent, Config{HeaderTimeout: bound}, "header_timeout"},
		{"slow-trickle body", trickle, Config{BodyTimeout: bound}, "body_timeout"},
		{"overall deadline", slowHeaders, Config{Timeout: bound, HeaderTimeout: time.Minute}, "deadline"},
	}
	for _, p := range []Policy{Timeout, Breaker, Hedge, Adaptive} {
		for _, c := range cases {
			t.Run(string(p)+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				cfg := c.cfg
				cfg.Backend, cfg.Policy = c.backend, p
				if cfg.Timeout == 0 {
					cfg.Timeout = 10 * time.Second
				}
				f, url := startFront(t, cfg)
				a := call(t, url)
				if a.code != http.StatusGatewayTimeout {
					t.Fatalf("status %d %q, want 504", a.code, a.body)
				}
				// A hedge is another attempt with the same bound, started
				// HedgeDelay after the one before.
				limit := bound + slack
				if p == Hedge && c.kind != "deadline" {
					limit += time.Duration(f.cfg.MaxHedges) * f.cfg.HedgeDelay
				} else if a.failure != c.kind {
					t.Errorf("X-Failure %q (%q), want %q", a.failure, a.body, c.kind)
				}
				if a.took < bound || a.took > limit {
					t.Errorf("ended after %v, want between %v and %v", a.took, bound, limit)
				}
				if p != Hedge {
					if got := testutil.ToFloat64(f.requests.WithLabelValues(c.kind)); got != 1 {
						t.Errorf("frontend_requests_total{outcome=%s} = %v, want 1", c.kind, got)
					}
				}
			})
		}
	}
}

// TestNoTimeoutWaits shows the baseline: with policy None the front waits
// for the back as long as it takes.
func TestNoTimeoutWaits(t *testing.T) {
	_, back := startBack(t, backend.Config{Delay: 1500 * time.Millisecond})
	_, url := startFront(t, Config{Backend: back, Policy: None, Timeout: 100 * time.Millisecond, HeaderTimeout: 100 * time.Millisecond})
	if a := call(t, url); a.code != http.StatusOK || a.took < 1500*time.Millisecond {
		t.Fatalf("%d after %v; want 200 after the back's 1.5 s", a.code, a.took)
	}
}

// TestNoTimeoutFollowsTheClient: even without a timeout, a call ends when
// the client that asked for it leaves.
func TestNoTimeoutFollowsTheClient(t *testing.T) {
	_, backURL := startBack(t, backend.Config{Mode: backend.BlackHole})
	f, url := startFront(t, Config{Backend: backURL, Policy: None})
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := client.Get(url); err == nil {
		t.Fatal("the black hole answered")
	}
	testkit.Eventually(t, 5*time.Second, "the front's call ends when its client leaves", func() bool {
		return testutil.ToFloat64(f.requests.WithLabelValues("client_gone")) == 1 && f.inflight.Load() == 0
	})
}

func TestDeadlinePropagatesToTheBack(t *testing.T) {
	var got atomic.Int64
	reg := prometheus.NewRegistry()
	inner, err := backend.New(backend.Config{Delay: time.Minute}, reg)
	if err != nil {
		t.Fatal(err)
	}
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.ParseInt(r.Header.Get(backend.TimeoutHeader), 10, 64)
		got.Store(ms)
		inner.ServeHTTP(w, r)
	}))
	defer back.Close()
	_, url := startFront(t, Config{Backend: back.URL + "/", Timeout: 400 * time.Millisecond})
	a := call(t, url)
	if a.code != http.StatusGatewayTimeout || a.failure != "deadline" {
		t.Fatalf("%d %s %q; want 504 deadline", a.code, a.failure, a.body)
	}
	if ms := got.Load(); ms < 1 || ms > 400 {
		t.Errorf("the back got %s: %d ms; want the time left, 1 to 400", backend.TimeoutHeader, ms)
	}
	// The back stops the work the front gave up on: nothing left running.
	testkit.Eventually(t, 5*time.Second, "the back's request ends at the deadline", func() bool {
		return testkit.MetricSum(t, reg, "backend_inflight_requests", nil) == 0 && testkit.MetricSum(t, reg, "backend_answers_total", nil) == 1
	})
}

func TestHedgeAnswersFromTheFasterAttempt(t *testing.T) {
	var n atomic.Int64
	release := make(chan struct{})
	defer close(release)
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 { // the first attempt hangs
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		io.WriteString(w, "fast")
	}))
	defer back.Close()
	f, url := startFront(t, Config{Backend: back.URL + "/", Policy: Hedge, HedgeDelay: 50 * time.Millisecond})
	a := call(t, url)
	if a.code != http.StatusOK || a.body != "fast" {
		t.Fatalf("%d %q; want the hedge's answer", a.code, a.body)
	}
	if got := testutil.ToFloat64(f.attempts.WithLabelValues("hedge")); got != 1 {
		t.Errorf("hedges sent: %v, want 1", got)
	}
}

func TestBreakerOpens(t *testing.T) {
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	defer back.Close()
	f, url := startFront(t, Config{Backend: back.URL + "/", Policy: Breaker, BreakerMinRequests: 5, BreakerDelay: time.Minute})
	for i := range 5 {
		if a := call(t, url); a.code != http.StatusBadGateway || a.failure != "backend_status" || !strings.Contains(a.body, "500") {
			t.Fatalf("call %d: %d %s %q; want 502 backend_status naming 500", i, a.code, a.failure, a.body)
		}
	}
	a := call(t, url)
	if a.code != http.StatusServiceUnavailable || a.failure != "breaker_open" {
		t.Fatalf("%d %s %q; want 503 breaker_open", a.code, a.failure, a.body)
	}
	if got := testutil.ToFloat64(f.attempts.WithLabelValues("primary")); got != 5 {
		t.Errorf("calls to the back: %v, want 5 (none while open)", got)
	}
}

func TestAdaptiveShedsAboveTheLimit(t *testing.T) {
	_, back := startBack(t, backend.Config{Mode: backend.BlackHole})
	f, url := startFront(t, Config{Backend: back, Policy: Adaptive, LimitMin: 1, LimitInitial: 2, LimitMax: 2, Timeout: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range 2 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	testkit.Eventually(t, 5*time.Second, "two calls hold the limit", func() bool { return f.inflight.Load() == 2 })
	a := call(t, url)
	if a.code != http.StatusServiceUnavailable || a.failure != "shed" {
		t.Fatalf("%d %s %q; want 503 shed", a.code, a.failure, a.body)
	}
}

func TestBoundsAndBadAnswers(t *testing.T) {
	_, big := startBack(t, backend.Config{Delay: time.Millisecond, BodyBytes: 2000})
	_, url := startFront(t, Config{Backend: big, MaxBodyBytes: 1000})
	if a := call(t, url); a.code != http.StatusBadGateway || a.failure != "body_too_large" {
		t.Errorf("large answer: %d %s %q; want 502 body_too_large", a.code, a.failure, a.body)
	}

	closed := "http://" + testkit.FreeAddr(t) + "/"
	_, url = startFront(t, Config{Backend: closed})
	if a := call(t, url); a.code != http.StatusBadGateway || a.failure != "unreachable" {
		t.Errorf("closed port: %d %s %q; want 502 unreachable", a.code, a.failure, a.body)
	}

	_, hole := startBack(t, backend.Config{Mode: backend.BlackHole})
	f, url := startFront(t, Config{Backend: hole, MaxInflight: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	defer func() { cancel(); <-done }()
	testkit.Eventually(t, 5*time.Second, "one request in flight", func() bool { return f.inflight.Load() == 1 })
	if a := call(t, url); a.code != http.StatusServiceUnavailable || a.failure != "inflight_limit" {
		t.Errorf("over MaxInflight: %d %s %q; want 503 inflight_limit", a.code, a.failure, a.body)
	}
}

func TestConfigValidation(t *testing.T) {
	ok := "http://127.0.0.1:1/"
	for _, c := range []Config{
		{}, {Backend: "127.0.0.1:1"}, {Backend: "ftp://x/"}, {Backend: "http://u:p@h/"}, {Backend: ok, Policy: "retry"},
		{Backend: ok, Timeout: -1}, {Backend: ok, ConnectTimeout: 2 * time.Hour}, {Backend: ok, MaxBodyBytes: -1},
		{Backend: ok, MaxInflight: -1}, {Backend: ok, BreakerFailureRate: 1.5}, {Backend: ok, HedgeBudget: -0.1},
		{Backend: ok, MaxHedges: 9}, {Backend: ok, Policy: Hedge, HedgeDelay: time.Second, Timeout: time.Second},
		{Backend: ok, LimitMin: 50, LimitInitial: 10}, {Backend: ok, LimitMax: 1_000_000},
	} {
		if _, err := New(c, nil); err == nil || !strings.HasPrefix(err.Error(), "frontend: ") {
			t.Errorf("New(%+v) = %v; want a frontend: error", c, err)
		}
	}
	f, err := New(Config{Backend: ok}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Config(); c.Policy != Timeout || c.Timeout != 3*time.Second || c.LimitInitial != DefaultLimitInitial {
		t.Errorf("defaults: %+v", c)
	}
}
