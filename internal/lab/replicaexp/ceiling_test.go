package replicaexp

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"testing"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/hello"
)

// TestHelloLike: the hello world made from a catalog answer answers as
// many bytes, headers included, through the same shared server.
func TestHelloLike(t *testing.T) {
	const body = `{"id":4242,"name":"Velrakam Glass Holding","region":"Kamchatka","email":"orders4242@aldan.example","phone":"+7 970 376-91-13","credit_limit_cents":216250000,"updated_at":"2025-01-03T22:41:00Z"}` + "\n"
	catalog := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Replica-Age", "0.156")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	})
	answer := func(h http.Handler, path string) (http.Header, []byte) {
		srv := httptest.NewServer(server.Handler(server.Config{}, h))
		defer srv.Close()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		dump, err := httputil.DumpResponse(resp, true)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header, dump
	}
	header, want := answer(catalog, "/customers/4242")
	c := helloLike(header, len(body))
	if got := c.String(); got != "a 194-byte JSON body with X-Replica-Age" {
		t.Errorf("String() = %q", got)
	}
	h, err := hello.New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	gotHeader, got := answer(h, "/")
	if len(got) != len(want) || len(gotHeader) != len(header) {
		t.Errorf("hello answers %d bytes, %d headers:\n%s\nthe catalog %d bytes, %d headers:\n%s", len(got), len(gotHeader), got, len(want), len(header), want)
	}
}
