package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHealthzAndMetrics(t *testing.T) {
	var ready error
	h := Handler(Config{Name: "t", Ready: func() error { return ready }}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "app")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz = %d %q", code, body)
	}
	ready = errors.New("loading the snapshot")
	if code, body := get("/healthz"); code != 503 || !strings.Contains(body, "loading the snapshot") {
		t.Fatalf("healthz while not ready = %d %q, want 503 with the reason", code, body)
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Run(context.Background(), Config{Name: "t", Addr: ln.Addr().String()}, http.NotFoundHandler())
	if err == nil || !strings.Contains(err.Error(), "--addr") {
		t.Fatalf("Run on a taken port = %v, want an error that says what to do", err)
	}
}
