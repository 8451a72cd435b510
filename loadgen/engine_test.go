package loadgen

import (
	"maps"
	"net/http"
	"strings"
	"testing"
)

// TestEngineMatchesGoroutines runs the same closed-model loads on the event
// loop (the default for plain http on Linux) and on a goroutine per
// connection (HLAB_LOADGEN_GOROUTINES), against answers framed every way
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
			t.Setenv("HLAB_LOADGEN_GOROUTINES", "1")
			gor := run(t, srv.URL+tc.path, opts...)
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
