package lb

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRoundRobin(t *testing.T) {
	var names []string
	var upstreams []string
	for _, name := range []string{"a", "b", "c"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name)
		}))
		defer srv.Close()
		names = append(names, name)
		upstreams = append(upstreams, strings.TrimPrefix(srv.URL, "http://"))
	}
	h, err := New(Config{Upstreams: upstreams})
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(h)
	defer proxy.Close()

	var got []string
	for range 6 {
		resp, err := http.Get(proxy.URL + "/handle")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, string(b))
	}
	if want := strings.Repeat(strings.Join(names, ""), 2); strings.Join(got, "") != want {
		t.Fatalf("upstream order %v, want round robin %s", got, want)
	}
}

func TestUpstreamDownIs502(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // nothing listens there now
	h, err := New(Config{Upstreams: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/handle", nil))
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "upstream failed") {
		t.Fatalf("got %d %q, want 502 with a reason", rec.Code, rec.Body.String())
	}
}

func TestBadConfig(t *testing.T) {
	for _, ups := range [][]string{nil, {"no-port"}} {
		if _, err := New(Config{Upstreams: ups}); err == nil {
			t.Errorf("New(%v) = nil error", ups)
		}
	}
}
