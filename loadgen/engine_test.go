package loadgen

import (
	"maps"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestEngineMatchesGoroutines runs the same closed-model loads on the event
// loop (the default for plain http on Linux) and on a goroutine per
// connection (the Goroutines option), against answers framed every way
// HTTP/1.1 allows, and wants the same counts, statuses and bytes.
func TestEngineMatchesGoroutines(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked": // no length: net/http sends it in chunks
			for range 4 {
				_, _ = w.Write([]byte(big[:10<<10]))
				w.(http.Flusher).Flush()
			}
		case "/big":
			_, _ = w.Write([]byte(big))
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = w.Write([]byte("bye\n"))
		case "/status":
			w.WriteHeader(http.StatusTeapot)
		default:
			hello(w, r)
		}
	})
	for _, tc := range []struct {
		name, path string
		opts       []Option
	}{
		{"length", "/", nil},
		{"chunked", "/chunked", nil},
		{"big", "/big", nil},
		{"connection close", "/close", nil},
		{"status", "/status", nil},
		{"HEAD", "/", []Option{Method("HEAD")}},
		{"POST with body", "/", []Option{Method("POST"), Body([]byte("payload")), Header("X-Test", "1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]Option{Requests(60), Connections(3)}, tc.opts...)
			loop := run(t, srv.URL+tc.path, opts...)
			gor := run(t, srv.URL+tc.path, append(opts, Goroutines())...)
			if loop.Requests != 60 || gor.Requests != 60 {
				t.Fatalf("requests: loop %d, goroutines %d, want 60", loop.Requests, gor.Requests)
			}
			if !maps.Equal(loop.StatusCodes, gor.StatusCodes) || !maps.Equal(loop.Errors, gor.Errors) {
				t.Errorf("loop: %v %v; goroutines: %v %v", loop.StatusCodes, loop.Errors, gor.StatusCodes, gor.Errors)
			}
			if loop.BytesOut != gor.BytesOut || loop.BytesIn != gor.BytesIn {
				t.Errorf("bytes in/out: loop %d/%d, goroutines %d/%d", loop.BytesIn, loop.BytesOut, gor.BytesIn, gor.BytesOut)
			}
		})
	}
}

// TestEngineLocalhost: a host name that resolves to an address nothing
// listens on as well as to the server's (localhost: ::1 and 127.0.0.1)
// still reaches the server.
func TestEngineLocalhost(t *testing.T) {
	srv := newServer(t, hello) // listens on 127.0.0.1 only
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	res := run(t, url, Requests(20), Connections(2))
	if res.StatusCodes[200] != 20 {
		t.Errorf("StatusCodes %v, Errors %v", res.StatusCodes, res.Errors)
	}
}

// TestEngineOpenMatchesGoroutines runs the same open-model loads on the
// event loop and on the dispatcher with its workers, and wants the same
// counts, statuses and errors, and the same accounting of late and unsent
// sends when the server cannot keep up.
func TestEngineOpenMatchesGoroutines(t *testing.T) {
	// The open model's event loop runs with GOMAXPROCS <= 2 only.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			for range 3 {
				_, _ = w.Write([]byte(strings.Repeat("y", 4<<10)))
				w.(http.Flusher).Flush()
			}
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = w.Write([]byte("bye\n"))
		case "/status":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/slow":
			time.Sleep(50 * time.Millisecond)
			hello(w, r)
		default:
			hello(w, r)
		}
	})
	for _, tc := range []struct {
		name, path string
		opts       []Option
		slow       bool
	}{
		{"length", "/", []Option{Rate(2000), Requests(200), Connections(4)}, false},
		{"chunked", "/chunked", []Option{Rate(1000), Requests(100), Connections(4)}, false},
		{"connection close", "/close", []Option{Rate(1000), Requests(100), Connections(4)}, false},
		{"status", "/status", []Option{Rate(1000), Requests(100)}, false},
		{"HEAD", "/", []Option{Rate(1000), Requests(100), Method("HEAD")}, false},
		// One connection, answers in 50 ms, 100 intended a second: most
		// sends are late or never go out, and latency counts from the
		// intended time.
		{"late and unsent", "/slow", []Option{Rate(100), Duration(time.Second), Connections(1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loop := run(t, srv.URL+tc.path, tc.opts...)
			gor := run(t, srv.URL+tc.path, append(tc.opts, Goroutines())...)
			t.Logf("loop: requests %d, %+v; goroutines: requests %d, %+v", loop.Requests, loop.Missed, gor.Requests, gor.Missed)
			if !tc.slow {
				if loop.Requests != gor.Requests || loop.Missed.Unsent != gor.Missed.Unsent {
					t.Errorf("requests/missed: loop %d %+v, goroutines %d %+v", loop.Requests, loop.Missed, gor.Requests, gor.Missed)
				}
				if !maps.Equal(loop.StatusCodes, gor.StatusCodes) || !maps.Equal(loop.Errors, gor.Errors) {
					t.Errorf("loop: %v %v; goroutines: %v %v", loop.StatusCodes, loop.Errors, gor.StatusCodes, gor.Errors)
				}
				if loop.BytesOut != gor.BytesOut || loop.BytesIn != gor.BytesIn {
					t.Errorf("bytes in/out: loop %d/%d, goroutines %d/%d", loop.BytesIn, loop.BytesOut, gor.BytesIn, gor.BytesOut)
				}
				return
			}
			for _, res := range []*Result{loop, gor} {
				if res.Requests+res.Missed.Unsent != 100 {
					t.Errorf("Requests %d + Unsent %d != 100 intended", res.Requests, res.Missed.Unsent)
				}
				// About 20 sent (one per 50 ms), all but the first late.
				if res.Requests < 15 || res.Requests > 21 || res.Missed.Late < res.Requests-2 || res.Missed.MaxLag < 500*time.Millisecond {
					t.Errorf("Requests %d, Missed %+v: want about 20 sent, nearly all late", res.Requests, res.Missed)
				}
				if res.Latency.P50 < 4*res.LatencyUncorrected.P50 || res.StatusCodes[200] != res.Requests {
					t.Errorf("p50 %v (uncorrected %v), statuses %v: want latency from the intended time, all 200",
						res.Latency.P50, res.LatencyUncorrected.P50, res.StatusCodes)
				}
			}
			if d := loop.Requests - gor.Requests; d < -2 || d > 2 {
				t.Errorf("requests: loop %d, goroutines %d", loop.Requests, gor.Requests)
			}
		})
	}
}

// TestEngineOpenRefused: sends to a port nothing listens on fail at once,
// counted as the workers count them.
func TestEngineOpenRefused(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	srv := newServer(t, hello)
	url := srv.URL
	srv.Close()
	opts := []Option{Rate(1000), Requests(50), Connections(4)}
	loop := run(t, url, opts...)
	gor := run(t, url, append(opts, Goroutines())...)
	if loop.Requests != 50 || gor.Requests != 50 || !maps.Equal(loop.Errors, gor.Errors) || len(loop.Errors) == 0 {
		t.Errorf("loop: %d %v; goroutines: %d %v", loop.Requests, loop.Errors, gor.Requests, gor.Errors)
	}
}
