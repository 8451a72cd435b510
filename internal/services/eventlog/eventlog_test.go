package eventlog

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/testkit"
)

func TestLogMarshalsEveryIteration(t *testing.T) {
	// Each marshalled string is 50 letters plus two quotes.
	if got, want := Log(), 1001*(LogStringLen+2); got != want {
		t.Fatalf("Log() marshalled %d bytes, want %d", got, want)
	}
}

func TestPostEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()

	tests := []struct {
		name     string
		method   string
		body     string
		wantCode int
		wantBody string
	}{
		{"saved", "POST", `{"id":"1","body":"x"}`, 200, Saved},
		{"empty", "POST", "", 400, "empty event"},
		{"too large", "POST", strings.Repeat("x", MaxEventBytes+1), 413, "at most"},
		{"wrong method", "GET", "", 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+"/events", strings.NewReader(tt.body))
			resp, body := testkit.Do(t, req)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.wantCode, body)
			}
			if !strings.Contains(body, tt.wantBody) {
				t.Fatalf("body %q, want it to contain %q", body, tt.wantBody)
			}
		})
	}
	if got := testkit.MetricSum(t, reg, "eventlog_http_events_total", nil); got != 1 {
		t.Fatalf("eventlog_http_events_total = %v, want 1", got)
	}
}

func TestWindow(t *testing.T) {
	w := newWindow(3)
	steps := []struct {
		id      string
		wantDup bool
	}{
		{"a", false}, {"b", false}, {"a", true}, {"c", false},
		{"d", false}, // evicts a
		{"a", false}, // forgotten: processed again (at-least-once)
		{"d", true}, {"b", false},
	}
	for i, s := range steps {
		if got := w.add(s.id); got != s.wantDup {
			t.Fatalf("step %d: add(%q) = %v, want %v", i, s.id, got, s.wantDup)
		}
	}
	if len(w.ids) != 3 {
		t.Fatalf("window holds %d ids, want 3", len(w.ids))
	}
}

// slowBody is a request body whose read fails as one does at the
// server's read timeout.
type slowBody struct{}

func (slowBody) Read([]byte) (int, error) {
	return 0, fmt.Errorf("read tcp 127.0.0.1:8080->127.0.0.1:5555: %w", os.ErrDeadlineExceeded)
}

// TestPostEventsSlowBody: a body cut off by the read timeout is a 408,
// not a body too large.
func TestPostEventsSlowBody(t *testing.T) {
	req := httptest.NewRequest("POST", "/events", io.NopCloser(slowBody{}))
	w := httptest.NewRecorder()
	Handler(prometheus.NewRegistry()).ServeHTTP(w, req)
	if w.Code != http.StatusRequestTimeout {
		t.Fatalf("status %d (%s), want 408", w.Code, w.Body)
	}
}

func TestConsumerConfig(t *testing.T) {
	if _, err := NewConsumer(ConsumerConfig{}); err == nil {
		t.Fatal("NewConsumer without brokers succeeded")
	}
	c, err := NewConsumer(ConsumerConfig{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.cfg.Topic != DefaultTopic || c.cfg.Group != DefaultGroup || c.cfg.DedupWindow != DefaultDedupWindow {
		t.Fatalf("defaults not applied: %+v", c.cfg)
	}
	if c.Ready() == nil {
		t.Fatal("Ready before Kafka answered")
	}
}
