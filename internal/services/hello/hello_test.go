package hello_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/hello"
	"github.com/highload-lab/hlab/internal/testkit"
)

func TestHello(t *testing.T) {
	h, err := hello.New(hello.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		code int
		body string
	}{
		{"/", 200, "Hello, World!\n"},
		{"/other", 404, "404 page not found\n"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", tt.path, nil))
		if w.Code != tt.code || w.Body.String() != tt.body {
			t.Errorf("GET %s = %d %q, want %d %q", tt.path, w.Code, w.Body.String(), tt.code, tt.body)
		}
	}
}

// TestSameBytes: with BodyBytes and Headers, every answer is a JSON body
// of exactly that size with the headers asked for, as the lab relies on
// to stand it beside a service's answer.
func TestSameBytes(t *testing.T) {
	for _, n := range []int{13, 14, 194, 4096} {
		h, err := hello.New(hello.Config{BodyBytes: n, Headers: []string{"X-Replica-Age: 0.123"}})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the shared header values survive an answer
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			body := w.Body.String()
			if w.Code != 200 || len(body) != n || !strings.HasSuffix(body, "\n") || !json.Valid([]byte(body)) {
				t.Fatalf("body-bytes %d: %d %q (%d bytes), want 200 and valid JSON of %d bytes", n, w.Code, body, len(body), n)
			}
			if got := w.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
			if got := w.Header().Get("X-Replica-Age"); got != "0.123" {
				t.Errorf("X-Replica-Age %q, want 0.123", got)
			}
		}
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []hello.Config{
		{BodyBytes: 12},
		{BodyBytes: -1},
		{BodyBytes: hello.MaxBodyBytes + 1},
		{Headers: []string{"no colon"}},
		{Headers: []string{": empty name"}},
		{Headers: []string{"Bad Name: v"}},
		{Headers: make([]string, hello.MaxHeaders+1)},
	} {
		if _, err := hello.New(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestArgs: the lab's command line gives back the Config.
func TestArgs(t *testing.T) {
	c := hello.Config{BodyBytes: 194, Headers: []string{"X-Replica-Age: 0.123"}}
	got := strings.Join(c.Args(), " ")
	if want := "--body-bytes=194 --header=X-Replica-Age: 0.123"; got != want {
		t.Errorf("Args() = %q, want %q", got, want)
	}
}

// TestRoutes: GET / (served without the mux's match) and the requests
// around it answer as the mux routes them, labelled by the route.
func TestRoutes(t *testing.T) {
	h, err := hello.New(hello.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s := server.Handler(server.Config{Registry: reg}, h)
	for _, tt := range []struct {
		method, path string
		code         int
	}{{"GET", "/", 200}, {"HEAD", "/", 200}, {"POST", "/", 405}, {"GET", "/x", 404}} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
		if w.Code != tt.code {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.path, w.Code, tt.code)
		}
	}
	if got := testkit.MetricSum(t, reg, "http_requests_total", map[string]string{"path": "GET /{$}", "code": "200"}); got != 2 {
		t.Errorf("GET /{$} answered 200 %v times, want 2 (GET and HEAD)", got)
	}
}
