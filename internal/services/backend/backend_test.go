package backend

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/highload-lab/hlab/internal/testkit"
)

// start serves a back with cfg on 127.0.0.1.
func start(t *testing.T, cfg Config) (*Service, *httptest.Server) {
	t.Helper()
	s, err := New(cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, string, time.Duration) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, body := testkit.Do(t, req)
	return resp, body, time.Since(start)
}

func TestAnswersAfterDelay(t *testing.T) {
	s, srv := start(t, Config{Delay: 30 * time.Millisecond, BodyBytes: 100})
	resp, body, took := get(t, srv.URL+"/", nil)
	if resp.StatusCode != http.StatusOK || len(body) != 100 {
		t.Fatalf("status %d, %d bytes; want 200 and 100 bytes", resp.StatusCode, len(body))
	}
	if took < 30*time.Millisecond {
		t.Errorf("answered after %v, before the 30ms delay", took)
	}
	if got := testutil.ToFloat64(s.requests.WithLabelValues("normal")); got != 1 {
		t.Errorf("backend_requests_total{kind=normal} = %v, want 1", got)
	}
}

func TestHonoursTheCallersDeadline(t *testing.T) {
	s, srv := start(t, Config{SlowFraction: 1, SlowDelay: time.Minute})
	resp, body, took := get(t, srv.URL+"/", map[string]string{TimeoutHeader: "50"})
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "deadline") {
		t.Fatalf("status %d %q; want 504 naming the deadline", resp.StatusCode, body)
	}
	if took > 30*time.Second {
		t.Errorf("took %v: the slow request ran past the caller's deadline", took)
	}
	if got := testutil.ToFloat64(s.answers.WithLabelValues(outcomeDeadline)); got != 1 {
		t.Errorf("backend_answers_total{outcome=deadline} = %v, want 1", got)
	}
}

func TestRejectsBadTimeoutHeader(t *testing.T) {
	_, srv := start(t, Config{})
	for _, v := range []string{"abc", "0", "-5", "1.5", "3600001", "99999999999999999999"} {
		t.Run(v, func(t *testing.T) {
			resp, body, _ := get(t, srv.URL+"/", map[string]string{TimeoutHeader: v})
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, TimeoutHeader) {
				t.Errorf("status %d %q; want 400 naming %s", resp.StatusCode, body, TimeoutHeader)
			}
		})
	}
}

func TestTrickleSendsHeadersFirst(t *testing.T) {
	_, srv := start(t, Config{Mode: Trickle, TrickleInterval: 5 * time.Millisecond, BodyBytes: 20})
	start := time.Now()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	headers := time.Since(start)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	all := time.Since(start)
	if len(b) != 20 {
		t.Fatalf("got %d body bytes, want 20", len(b))
	}
	// 20 bytes 5 ms apart: the body takes at least 100 ms after the headers.
	if all-headers < 90*time.Millisecond {
		t.Errorf("headers after %v, body complete after %v: not a trickle", headers, all)
	}
}

func TestTrickleStopsAtTheDeadline(t *testing.T) {
	s, srv := start(t, Config{Mode: Trickle, TrickleInterval: time.Second, BodyBytes: 60})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Header.Set(TimeoutHeader, "100")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("read a whole body; want it cut short at the deadline")
	}
	testkit.Eventually(t, 5*time.Second, "the deadline is counted", func() bool {
		return testutil.ToFloat64(s.answers.WithLabelValues(outcomeDeadline)) == 1
	})
}

func TestBlackHoleNeverAnswers(t *testing.T) {
	s, srv := start(t, Config{Mode: BlackHole})
	client := &http.Client{Timeout: 200 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Header.Set(TimeoutHeader, "10") // ignored: a black hole does nothing
	_, err := client.Do(req)
	var ue *url.Error
	if !errors.As(err, &ue) || !ue.Timeout() {
		t.Fatalf("err = %v; want the client's timeout", err)
	}
	// When the caller leaves, the request ends: nothing leaks.
	testkit.Eventually(t, 5*time.Second, "the black-holed request ends after the caller left", func() bool {
		return testutil.ToFloat64(s.inflight) == 0 && testutil.ToFloat64(s.answers.WithLabelValues(outcomeCanceled)) == 1
	})
}

func TestFaultEndpoint(t *testing.T) {
	s, srv := start(t, Config{})
	put := func(query string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/fault?"+query, nil)
		resp, body := testkit.Do(t, req)
		return resp.StatusCode, body
	}
	code, body := put("mode=trickle&slow_fraction=0.25&slow_delay=2s&trickle_interval=7ms&body_bytes=10")
	if code != http.StatusOK {
		t.Fatalf("PUT /fault: %d %s", code, body)
	}
	want := Config{Mode: Trickle, Delay: DefaultDelay, SlowFraction: 0.25, SlowDelay: 2 * time.Second, TrickleInterval: 7 * time.Millisecond, BodyBytes: 10}
	if got := s.Config(); got != want {
		t.Errorf("config %+v, want %+v", got, want)
	}
	_, js, _ := get(t, srv.URL+"/fault", nil)
	var f faultJSON
	if err := json.Unmarshal([]byte(js), &f); err != nil || f.Mode != Trickle || f.TrickleInterval != "7ms" {
		t.Errorf("GET /fault = %s (%v)", js, err)
	}
	for _, bad := range []string{"mode=sideways", "delay=fast", "delay=-1s", "slow_fraction=2", "slow_fraction=x",
		"trickle_interval=0s1", "trickle_interval=2m", "body_bytes=-1", "body_bytes=2000000", "color=red"} {
		if code, body := put(bad); code != http.StatusBadRequest || !strings.HasPrefix(body, "backend:") {
			t.Errorf("PUT /fault?%s: %d %q; want 400 with a reason", bad, code, body)
		}
	}
	if got := s.Config(); got != want {
		t.Errorf("a refused change altered the config: %+v", got)
	}
}

func TestConfigBounds(t *testing.T) {
	for _, c := range []Config{
		{Mode: "x"}, {Delay: -time.Second}, {Delay: 2 * time.Hour}, {SlowFraction: -0.1}, {SlowFraction: 1.5},
		{SlowDelay: -1}, {TrickleInterval: time.Microsecond}, {BodyBytes: MaxBodyBytes + 1},
	} {
		if _, err := New(c, nil); err == nil {
			t.Errorf("New(%+v) accepted it", c)
		}
	}
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Mode: Normal, Delay: DefaultDelay, SlowDelay: DefaultSlowDelay, TrickleInterval: DefaultTrickleInterval, BodyBytes: DefaultBodyBytes}
	if got := s.Config(); got != want {
		t.Errorf("zero Config became %+v, want %+v", got, want)
	}
}

func TestServesOnlyGETRoot(t *testing.T) {
	_, srv := start(t, Config{Delay: time.Millisecond})
	for _, c := range []struct {
		method, path string
		want         int
	}{{"POST", "/", http.StatusMethodNotAllowed}, {"GET", "/other", http.StatusNotFound}, {"DELETE", "/fault", http.StatusMethodNotAllowed}} {
		req, _ := http.NewRequestWithContext(context.Background(), c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}
