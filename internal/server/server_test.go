package server

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/server/servertest"
	"github.com/highload-lab/hlab/internal/testkit"
)

func TestHealthzAndMetrics(t *testing.T) {
	var ready error
	var logged strings.Builder
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	h := Handler(Config{Name: "t", Ready: func() error { return ready }, Logger: logger}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "app")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, body := testkit.Get(t, srv.URL+path)
		return resp.StatusCode, body
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz = %d %q", code, body)
	}
	// The reason may name a database's user and host: the log has it,
	// whoever reaches the port does not.
	ready = errors.New("failed to connect to user=tasks host=db.internal")
	if code, body := get("/healthz"); code != 503 || body != "not ready\n" {
		t.Fatalf("healthz while not ready = %d %q, want 503 not ready, nothing more", code, body)
	}
	if !strings.Contains(logged.String(), "db.internal") {
		t.Errorf("the reason is not in the log: %q", logged.String())
	}
	if code, body := get("/anything"); code != 200 || body != "app" {
		t.Fatalf("app route = %d %q", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{`http_requests_total{code="200",path="/"}`, "go_goroutines", "http_request_duration_seconds_bucket"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestGracefulShutdown checks that a request in flight when the context
// ends is answered, and that Run then returns nil.
func TestGracefulShutdown(t *testing.T) {
	ln := testkit.Listen(t)
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		io.WriteString(w, "finished")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{Listener: ln}, h) }()

	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-started
	cancel()
	if body := <-got; body != "finished" {
		t.Fatalf("request in flight got %q, want it finished", body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after a clean shutdown", err)
	}
}

func TestListenError(t *testing.T) {
	ln := testkit.Listen(t)
	err := Run(context.Background(), Config{Name: "t", Addr: ln.Addr().String()}, http.NotFoundHandler())
	if err == nil || !strings.Contains(err.Error(), "--addr") {
		t.Fatalf("Run on a taken port = %v, want an error that says what to do", err)
	}
}

// serve runs h under Run with cfg on a loopback listener until the test
// ends, and returns the service's base URL.
func serve(t *testing.T, cfg Config, h http.Handler) string {
	t.Helper()
	cfg.Listener = testkit.Listen(t)
	testkit.Background(t, "Run", func(ctx context.Context) error { return Run(ctx, cfg, h) })
	return "http://" + cfg.Listener.Addr().String()
}

// TestAdminAddr: Go's profiles (whose /cmdline shows the flags, secrets
// included) are served on the admin listener only, never on the service's.
func TestAdminAddr(t *testing.T) {
	admin := testkit.Listen(t)
	public := serve(t, Config{Name: "t", AdminListener: admin}, http.NotFoundHandler())
	adminURL := "http://" + admin.Addr().String()
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(url string) int {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/heap"} {
		if code := get(public + path); code != http.StatusNotFound {
			t.Errorf("public %s = %d, want 404", path, code)
		}
		if code := get(adminURL + path); code != http.StatusOK {
			t.Errorf("admin %s = %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if code := get(public + path); code != http.StatusOK {
			t.Errorf("public %s = %d, want 200 (they stay on the service's address)", path, code)
		}
	}
}

// TestMetricsOnAdmin: with MetricsOnAdmin, /metrics is on the admin
// address only; the public one keeps /healthz.
func TestMetricsOnAdmin(t *testing.T) {
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := serve(t, Config{Name: "t", AdminListener: admin, MetricsOnAdmin: true}, http.NotFoundHandler())
	adminURL := "http://" + admin.Addr().String()
	for url, want := range map[string]int{public + "/metrics": 404, adminURL + "/metrics": 200, public + "/healthz": 200, adminURL + "/debug/pprof/": 200} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", url, resp.StatusCode, want)
		}
		if want == 200 && strings.HasSuffix(url, "/metrics") && !strings.Contains(string(b), "go_goroutines") {
			t.Errorf("admin /metrics lacks the runtime metrics")
		}
	}
}

// TestSlowBody: a client that sends its headers, then its body a byte a
// second, is cut off at the read timeout: the handler's read fails, the
// handler returns and the server closes the connection.
func TestSlowBody(t *testing.T) {
	handled := make(chan error, 1)
	url := serve(t, Config{Name: "t", ReadTimeout: time.Second}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		handled <- err
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
		}
	}))
	// Without a read timeout the server waits for the 1000 bytes for
	// ever (1000 s here); the limit is only the test's bound.
	_, held, err := servertest.Trickle(strings.TrimPrefix(url, "http://"), "POST", "/upload", "", "", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if held {
		t.Fatal("the server still holds the connection of a trickled body after 20 s (read timeout 1 s)")
	}
	select {
	case err := <-handled:
		if err == nil {
			t.Fatal("the handler read the whole trickled body")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return")
	}
}

// TestWriteTimeout: a response slower than the write timeout is cut; a
// handler that lifts the timeouts for its request (a WebSocket, a stream)
// is not.
func TestWriteTimeout(t *testing.T) {
	const slow = 1500 * time.Millisecond
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(slow)
		io.WriteString(w, "late")
	})
	mux.HandleFunc("/lifted", func(w http.ResponseWriter, r *http.Request) {
		if err := LiftTimeouts(w); err != nil {
			t.Errorf("LiftTimeouts: %v", err)
		}
		time.Sleep(slow)
		io.WriteString(w, "streamed")
	})
	url := serve(t, Config{Name: "t", WriteTimeout: 300 * time.Millisecond}, mux)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	if resp, err := client.Get(url + "/slow"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("/slow answered %d %q past the write timeout, want the connection cut", resp.StatusCode, b)
	}
	resp, err := client.Get(url + "/lifted")
	if err != nil {
		t.Fatalf("/lifted: %v, want it to outlive the write timeout", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "streamed" {
		t.Fatalf("/lifted = %q", b)
	}
}

// TestDefaults: the zero Config bounds reading a request and writing its
// answer, and serves no profiles.
func TestDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	if c.ReadTimeout != DefaultReadTimeout || c.ReadTimeout <= 0 {
		t.Errorf("default ReadTimeout = %v, want DefaultReadTimeout (%v)", c.ReadTimeout, DefaultReadTimeout)
	}
	if c.WriteTimeout != DefaultWriteTimeout || c.WriteTimeout <= 0 {
		t.Errorf("default WriteTimeout = %v, want DefaultWriteTimeout (%v)", c.WriteTimeout, DefaultWriteTimeout)
	}
	if c.AdminAddr != "" {
		t.Errorf("default AdminAddr = %q, want none", c.AdminAddr)
	}
}

func TestRegisterFlags(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		admin       string
		read, write time.Duration
	}{
		{nil, "", 0, 0}, // the defaults
		{[]string{"--admin-addr", "127.0.0.1:6060", "--read-timeout", "3s", "--write-timeout", "1m"}, "127.0.0.1:6060", 3 * time.Second, time.Minute},
		{[]string{"--read-timeout", "0", "--write-timeout", "0"}, "", -1, -1},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var c Config
		c.RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if c.AdminAddr != tc.admin || c.ReadTimeout != tc.read || c.WriteTimeout != tc.write {
			t.Errorf("%q: admin %q read %v write %v, want %q %v %v", tc.args, c.AdminAddr, c.ReadTimeout, c.WriteTimeout, tc.admin, tc.read, tc.write)
		}
	}
}

// TestReadyz: /readyz fails while the service is not ready or its data
// is stale, /healthz only while it is not ready, so a liveness probe on
// /healthz does not restart an instance whose data is merely old.
func TestReadyz(t *testing.T) {
	var ready, fresh error
	h := Handler(Config{Name: "t", Ready: func() error { return ready }, Fresh: func() error { return fresh }}, http.NotFoundHandler())
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, c := range []struct {
		ready, fresh    error
		healthz, readyz int
		body            string
	}{
		{nil, nil, 200, 200, "ok\n"},
		{nil, errors.New("replica: 7s old"), 200, 503, "stale\n"},
		{errors.New("stream down"), errors.New("replica: 7s old"), 503, 503, "not ready\n"},
	} {
		ready, fresh = c.ready, c.fresh
		hz, _ := testkit.Get(t, srv.URL+"/healthz")
		rz, body := testkit.Get(t, srv.URL+"/readyz")
		lz, _ := testkit.Get(t, srv.URL+"/livez")
		if hz.StatusCode != c.healthz || rz.StatusCode != c.readyz || body != c.body || lz.StatusCode != 200 {
			t.Errorf("ready %v, fresh %v: /healthz %d, /readyz %d %q, /livez %d; want %d, %d %q, 200",
				c.ready, c.fresh, hz.StatusCode, rz.StatusCode, body, lz.StatusCode, c.healthz, c.readyz, c.body)
		}
	}
}

// TestServiceRoutes: requests reach the service, or the server's own
// routes, as the server's mux routes them, with the same path label in
// the request metrics; an unclean path is still redirected to its clean
// form.
func TestServiceRoutes(t *testing.T) {
	svc := http.NewServeMux()
	svc.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "item "+r.PathValue("id")) })
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain") })
	for _, tt := range []struct {
		name          string
		h             http.Handler
		method, path  string
		code          int
		body, pattern string
	}{
		{"mux", svc, "GET", "/items/42", 200, "item 42", "GET /items/{id}"},
		{"mux", svc, "GET", "/items/4%2F2", 200, "item 4/2", "GET /items/{id}"},
		{"mux", svc, "GET", "/nothing/here", 404, "404 page not found\n", "unmatched"},
		{"mux", svc, "POST", "/items/42", 405, "Method Not Allowed\n", "unmatched"},
		{"mux", svc, "GET", "/items//42", 307, "", "/"},
		{"mux", svc, "GET", "/x/../items/42", 307, "", "/"},
		{"mux", svc, "GET", "/healthz", 200, "ok\n", "GET /healthz"},
		{"mux", svc, "HEAD", "/livez", 200, "", "GET /livez"},
		{"plain", plain, "GET", "/a/b/c", 200, "plain", "/"},
		{"plain", plain, "POST", "/healthz", 200, "plain", "/"},
		{"plain", plain, "GET", "/healthz/", 200, "plain", "/"},
	} {
		reg := prometheus.NewRegistry()
		w := httptest.NewRecorder()
		r := httptest.NewRequest(tt.method, tt.path, nil)
		Handler(Config{Registry: reg}, tt.h).ServeHTTP(w, r)
		if w.Code != tt.code || (tt.body != "" && w.Body.String() != tt.body) {
			t.Errorf("%s %s %s: %d %q, want %d %q", tt.name, tt.method, tt.path, w.Code, w.Body.String(), tt.code, tt.body)
		}
		if got := testkit.MetricSum(t, reg, "http_requests_total", map[string]string{"path": tt.pattern}); got != 1 {
			t.Errorf("%s %s %s: %v requests with path label %q, want 1 (it got %q)", tt.name, tt.method, tt.path, got, tt.pattern, pathLabel(r))
		}
	}
}
