package loadgen

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/testkit"
)

func newServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func hello(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "hello\n")
}

func run(t testing.TB, url string, opts ...Option) *Result {
	t.Helper()
	res, err := Run(context.Background(), url, opts...)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestClosedConnectionsAndCount(t *testing.T) {
	const conns, total = 4, 200
	var served atomic.Int64
	var mu sync.Mutex
	addrs := map[string]bool{}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		// Hold the first requests so every connection has one in flight at
		// once and none is reused before all were dialed.
		if served.Add(1) <= conns {
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		addrs[r.RemoteAddr] = true
		mu.Unlock()
		hello(w, r)
	})

	res := run(t, srv.URL, Connections(conns), Requests(total))

	if res.Requests != total || served.Load() != total {
		t.Errorf("Requests = %d, server saw %d; want %d", res.Requests, served.Load(), total)
	}
	if len(addrs) != conns {
		t.Errorf("server saw %d distinct connections, want %d", len(addrs), conns)
	}
	if res.Model != "closed" || res.Connections != conns || res.Rate != 0 {
		t.Errorf("Model/Connections/Rate = %q/%d/%v", res.Model, res.Connections, res.Rate)
	}
	if res.Successes != total || res.SuccessRatio != 1 || res.StatusCodes[200] != total || len(res.Errors) != 0 {
		t.Errorf("Successes %d, ratio %v, codes %v, errors %v", res.Successes, res.SuccessRatio, res.StatusCodes, res.Errors)
	}
	if res.BytesIn <= 0 || res.BytesOut <= 0 || res.RPS <= 0 || res.Duration <= 0 {
		t.Errorf("BytesIn %d, BytesOut %d, RPS %v, Duration %v", res.BytesIn, res.BytesOut, res.RPS, res.Duration)
	}
	if res.Latency.P50 <= 0 || res.Latency.Max < 20*time.Millisecond || res.Latency != res.LatencyUncorrected {
		t.Errorf("Latency %+v, uncorrected %+v", res.Latency, res.LatencyUncorrected)
	}
}

func TestRequestShape(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != "POST", string(body) != `{"a":1}`,
			r.Header.Get("Content-Type") != "application/json",
			r.Header.Values("X-Multi")[0] != "one", r.Header.Values("X-Multi")[1] != "two",
			r.Host != "example.test", r.URL.RequestURI() != "/a/../b?q=1":
			t.Errorf("unexpected request: %s %s host %q headers %v body %q", r.Method, r.URL.RequestURI(), r.Host, r.Header, body)
			w.WriteHeader(http.StatusBadRequest)
		default:
			hello(w, r)
		}
	})
	res := run(t, srv.URL+"/a/../b?q=1", Requests(3), Method("POST"), Body([]byte(`{"a":1}`)),
		Header("Content-Type", "application/json"), Header("X-Multi", "one"), Header("X-Multi", "two"),
		Header("Host", "example.test"))
	if res.StatusCodes[200] != 3 || res.Method != "POST" {
		t.Errorf("StatusCodes %v, Errors %v, Method %q", res.StatusCodes, res.Errors, res.Method)
	}
}

func TestClosedDurationAndProgress(t *testing.T) {
	srv := newServer(t, hello)
	var calls []Progress
	res := run(t, srv.URL, Connections(2), Duration(600*time.Millisecond),
		OnProgress(func(p Progress) { calls = append(calls, p) }))

	if res.Requests == 0 || res.Duration < 600*time.Millisecond || res.Duration > 2*time.Second {
		t.Errorf("Requests %d in %v", res.Requests, res.Duration)
	}
	if len(calls) < 2 {
		t.Fatalf("OnProgress called %d times, want a few", len(calls))
	}
	last := calls[len(calls)-1]
	if last.Requests != res.Requests || last.Total != 600*time.Millisecond || last.Target != 0 || last.Errors != 0 {
		t.Errorf("last progress %+v, result has %d requests", last, res.Requests)
	}
}

// TestOpenRateAccuracy: the open model sends what it promised.
func TestOpenRateAccuracy(t *testing.T) {
	srv := newServer(t, hello)
	res := run(t, srv.URL, Rate(1000), Duration(5*time.Second))
	t.Logf("open 1000/s x 5s: %d requests in %v, late %d, unsent %d, max lag %v, p50 %v (uncorrected %v)",
		res.Requests, res.Duration, res.Missed.Late, res.Missed.Unsent, res.Missed.MaxLag,
		res.Latency.P50, res.LatencyUncorrected.P50)
	if res.Requests < 4950 || res.Requests > 5050 {
		t.Errorf("sent %d requests, want 5000 ± 1%%", res.Requests)
	}
	if res.Model != "open" || res.Rate != 1000 || res.Connections != 1000 || res.SuccessRatio != 1 {
		t.Errorf("Model %q, Rate %v, Connections %d, SuccessRatio %v", res.Model, res.Rate, res.Connections, res.SuccessRatio)
	}
	if res.RPS < 950 || res.RPS > 1050 {
		t.Errorf("RPS = %v, want about 1000", res.RPS)
	}
}

func TestOpenCountBound(t *testing.T) {
	srv := newServer(t, hello)
	res := run(t, srv.URL, Rate(500), Requests(50), Connections(5))
	if res.Requests != 50 || res.Missed.Unsent != 0 {
		t.Errorf("Requests %d, Unsent %d; want 50, 0", res.Requests, res.Missed.Unsent)
	}
	if res.Duration < 90*time.Millisecond {
		t.Errorf("50 requests at 500/s took %v, want about 100ms", res.Duration)
	}
}

// TestOpenUnsent: with one connection and a slow server the generator
// cannot keep its rate, and says so.
func TestOpenUnsent(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		hello(w, r)
	})
	res := run(t, srv.URL, Rate(100), Duration(time.Second), Connections(1))
	t.Logf("requests %d, late %d, unsent %d, max lag %v", res.Requests, res.Missed.Late, res.Missed.Unsent, res.Missed.MaxLag)
	if res.Requests+res.Missed.Unsent != 100 {
		t.Errorf("Requests %d + Unsent %d != 100 intended", res.Requests, res.Missed.Unsent)
	}
	if res.Missed.Unsent < 80 || res.Missed.Late == 0 || res.Missed.MaxLag < 500*time.Millisecond {
		t.Errorf("Missed = %+v, want most sends unsent and the rest late", res.Missed)
	}
}

// TestCoordinatedOmission: the server stalls every request for 1 s once.
// Measured from intended send times the stall shows in p99; measured from
// actual send times (what a closed-loop tool sees) it hides.
func TestCoordinatedOmission(t *testing.T) {
	var gate sync.RWMutex
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		gate.RLock()
		gate.RUnlock() //nolint:staticcheck // an empty critical section is the point
		hello(w, r)
	})
	stallDone := make(chan struct{})
	go func() {
		defer close(stallDone)
		time.Sleep(2 * time.Second)
		gate.Lock()
		time.Sleep(time.Second)
		gate.Unlock()
	}()
	res := run(t, srv.URL, Rate(1000), Duration(5*time.Second), Connections(10))
	<-stallDone
	t.Logf("p99 corrected %v, uncorrected %v; p99.9 %v / %v; late %d, unsent %d, max lag %v, requests %d",
		res.Latency.P99, res.LatencyUncorrected.P99, res.Latency.P999, res.LatencyUncorrected.P999,
		res.Missed.Late, res.Missed.Unsent, res.Missed.MaxLag, res.Requests)
	if res.Latency.P99 < 500*time.Millisecond {
		t.Errorf("corrected p99 = %v, want >= 500ms: the stall must show", res.Latency.P99)
	}
	if res.LatencyUncorrected.P99 >= 100*time.Millisecond {
		t.Errorf("uncorrected p99 = %v, want < 100ms: from actual send times the stall hides", res.LatencyUncorrected.P99)
	}
	if res.Missed.Late == 0 {
		t.Errorf("Missed.Late = 0, want the sends held up by the stall counted")
	}
	if got := res.Percentile(99); got != res.Latency.P99 {
		t.Errorf("Percentile(99) = %v, Latency.P99 = %v", got, res.Latency.P99)
	}
}

func TestErrorConnectionRefused(t *testing.T) {
	addr := testkit.FreeAddr(t)
	res := run(t, "http://"+addr+"/", Requests(5))
	if res.Requests != 5 || res.Errors[KindConnectionRefused] != 5 || res.SuccessRatio != 0 || len(res.StatusCodes) != 0 {
		t.Errorf("Requests %d, Errors %v, StatusCodes %v", res.Requests, res.Errors, res.StatusCodes)
	}
}

func TestErrorTimeout(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	start := time.Now()
	res := run(t, srv.URL, Requests(3), Timeout(100*time.Millisecond))
	if res.Errors[KindTimeout] != 3 || res.Successes != 0 {
		t.Errorf("Errors %v, Successes %d", res.Errors, res.Successes)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("3 requests timing out after 100ms took %v", el)
	}
	if res.Latency.Max < 100*time.Millisecond {
		t.Errorf("timed-out requests must count with their timeout in latency: max %v", res.Latency.Max)
	}
}

func TestErrorConnectionClosed(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close()
	})
	res := run(t, srv.URL, Requests(5), Connections(2))
	t.Logf("Errors %v", res.Errors)
	closed := res.Errors[KindConnectionClosed] + res.Errors[KindConnectionReset]
	if res.Requests != 5 || closed != 5 {
		t.Errorf("Requests %d, Errors %v; want 5 connection_closed or connection_reset", res.Requests, res.Errors)
	}
}

func TestStatusCodes(t *testing.T) {
	var n atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 4 {
		case 0:
			w.WriteHeader(http.StatusInternalServerError)
		case 1:
			w.WriteHeader(http.StatusNotFound)
		case 2:
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}
	})
	res := run(t, srv.URL, Requests(20), Connections(2))
	want := map[int]int64{500: 5, 404: 5, 204: 5, 302: 5}
	for code, c := range want {
		if res.StatusCodes[code] != c {
			t.Errorf("StatusCodes = %v, want %v", res.StatusCodes, want)
			break
		}
	}
	if res.Successes != 10 || res.SuccessRatio != 0.5 || len(res.Errors) != 0 {
		t.Errorf("Successes %d, SuccessRatio %v, Errors %v", res.Successes, res.SuccessRatio, res.Errors)
	}
}

func TestInterrupt(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
			return
		}
		hello(w, r)
	})
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"closed", []Option{Connections(3)}},
		{"open", []Option{Rate(100), Connections(3)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			opts := append([]Option{Duration(time.Minute), Timeout(30 * time.Second)}, tt.opts...)
			res, err := Run(ctx, srv.URL+"/slow", opts...)
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Errorf("Run returned %v after start, want soon after ctx is done", el)
			}
			if !res.Interrupted || res.Requests != 0 || len(res.Errors) != 0 {
				t.Errorf("Interrupted %v, Requests %d, Errors %v; want true, 0 (abandoned requests are not counted)",
					res.Interrupted, res.Requests, res.Errors)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(hello))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes below are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	res := run(t, srv.URL, Requests(10), Connections(2), TLSConfig(&tls.Config{RootCAs: pool}))
	if res.StatusCodes[200] != 10 {
		t.Errorf("StatusCodes %v, Errors %v", res.StatusCodes, res.Errors)
	}
	// Without the test CA the certificate does not verify.
	res = run(t, srv.URL, Requests(2))
	if res.Errors[KindOther] != 2 {
		t.Errorf("unverified TLS: Errors %v, want other: 2", res.Errors)
	}
}

// TestGeneratorCPU: every run measures the CPU it used and had.
func TestGeneratorCPU(t *testing.T) {
	srv := newServer(t, hello)
	res := run(t, srv.URL, Requests(2000), Connections(4))
	g := res.Generator
	if g.CPU <= 0 || g.CPUsAvailable <= 0 || g.CPUsAvailable > float64(runtime.NumCPU()) {
		t.Errorf("Generator = %+v", g)
	}
	if g.Saturated != (g.CPU > 0.9*g.CPUsAvailable) {
		t.Errorf("Saturated %v with %.2f of %v CPUs", g.Saturated, g.CPU, g.CPUsAvailable)
	}
}
