package lb

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/testkit"
)

// named starts an upstream that answers its name and counts its requests.
func named(t *testing.T, name string, hits *atomic.Int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// proxy starts the balancer over ups and returns its URL and registry.
func proxy(t *testing.T, cfg Config) (string, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h, err := New(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, reg
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := testkit.Do(t, req)
	return resp.StatusCode, body
}

func TestRoundRobin(t *testing.T) {
	var hits atomic.Int64
	var ups []string
	for _, name := range []string{"a", "b", "c"} {
		ups = append(ups, named(t, name, &hits))
	}
	url, _ := proxy(t, Config{Upstreams: ups})
	var got []string
	for range 6 {
		_, body := get(t, "GET", url+"/handle")
		got = append(got, body)
	}
	if strings.Join(got, "") != "abcabc" {
		t.Fatalf("upstream order %v, want round robin abcabc", got)
	}
}

// TestNewConnectionPerRequest checks the default runs as nginx's does: no
// upstream connection is kept, each request opens its own.
func TestNewConnectionPerRequest(t *testing.T) {
	for _, tc := range []struct {
		idle      int
		wantConns int64
	}{{0, 5}, {4, 1}} {
		var conns atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		url, _ := proxy(t, Config{Upstreams: []string{strings.TrimPrefix(srv.URL, "http://")}, IdleConnsPerUpstream: tc.idle})
		for range 5 {
			if code, _ := get(t, "GET", url); code != 200 {
				t.Fatalf("status %d", code)
			}
		}
		srv.Close()
		if got := conns.Load(); got != tc.wantConns {
			t.Errorf("idle conns %d: the upstream saw %d connections for 5 requests, want %d", tc.idle, got, tc.wantConns)
		}
	}
}

// dropping listens and closes every connection once it has read a
// request, without answering: an upstream that dies mid-request.
func dropping(t *testing.T, accepted *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			http.ReadRequest(bufio.NewReader(c))
			c.(*net.TCPConn).SetLinger(0) // a reset, as from a killed process
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestPassiveHealthAndRetry puts a dead upstream among live ones, as a
// SIGKILLed replica is: one refusing connections, or one resetting them
// after reading the request. Every GET must still be answered, by a live
// upstream, and the dead one be tried once, then left alone for
// FailTimeout; a POST that hit it is not sent again.
func TestPassiveHealthAndRetry(t *testing.T) {
	for _, kind := range []string{"refused", "reset mid-request"} {
		t.Run(kind, func(t *testing.T) {
			var live, dropped atomic.Int64
			dead := testkit.FreeAddr(t) // nothing listens there: refused
			if kind != "refused" {
				dead = dropping(t, &dropped)
			}
			url, reg := proxy(t, Config{Upstreams: []string{dead, named(t, "b", &live), named(t, "c", &live)}})
			// The first request goes to the dead upstream: a POST is not sent again.
			if code, body := get(t, "POST", url); code != http.StatusBadGateway {
				t.Fatalf("POST to the dead upstream: %d %q, want 502 (not retried)", code, body)
			}
			for i := range 30 {
				if code, body := get(t, "GET", url); code != 200 || (body != "b" && body != "c") {
					t.Fatalf("GET %d: %d %q, want 200 from a live upstream", i, code, body)
				}
			}
			if n := live.Load(); n != 30 {
				t.Errorf("live upstreams answered %d of 30 GETs", n)
			}
			if kind != "refused" && dropped.Load() != 1 {
				t.Errorf("the dead upstream was tried %d times, want once (then down for the fail timeout)", dropped.Load())
			}
			if got := testkit.MetricSum(t, reg, "lb_upstream_failures_total", map[string]string{"upstream": dead}); got != 1 {
				t.Errorf("failures of the dead upstream counted %v, want 1 (the POST; then it was down)", got)
			}
		})
	}
}

// TestFailTimeoutEnds checks a marked upstream is tried again once its
// FailTimeout has passed, and that a GET is retried when it still fails.
func TestFailTimeoutEnds(t *testing.T) {
	var live, dropped atomic.Int64
	url, reg := proxy(t, Config{Upstreams: []string{dropping(t, &dropped), named(t, "b", &live)}, FailTimeout: 200 * time.Millisecond})
	for range 4 {
		if code, _ := get(t, "GET", url); code != 200 {
			t.Fatalf("GET: %d, want 200 (retried on the live upstream)", code)
		}
	}
	if dropped.Load() != 1 {
		t.Fatalf("the failing upstream was tried %d times within its fail timeout, want 1", dropped.Load())
	}
	time.Sleep(250 * time.Millisecond)
	for range 2 {
		get(t, "GET", url)
	}
	if dropped.Load() != 2 {
		t.Errorf("after its fail timeout the upstream was tried %d times in all, want 2", dropped.Load())
	}
	if got := testkit.MetricSum(t, reg, "lb_retries_total", nil); got != 2 {
		t.Errorf("lb_retries_total = %v, want 2", got)
	}
}

func TestBadConfig(t *testing.T) {
	for _, ups := range [][]string{nil, {"no-port"}} {
		if _, err := New(Config{Upstreams: ups}, prometheus.NewRegistry()); err == nil {
			t.Errorf("New(%v) = nil error", ups)
		}
	}
}
