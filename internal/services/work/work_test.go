package work

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/highload-lab/hlab/internal/testkit"
)

func TestHandle(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()

	tests := []struct {
		method   string
		path     string
		wantCode int
		wantBody string
	}{
		{"GET", "/handle", 200, "done!"},
		{"POST", "/handle", 405, ""},
		{"GET", "/nosuch", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			resp, body := testkit.Do(t, req)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if tt.wantBody != "" && body != tt.wantBody {
				t.Fatalf("body %q, want %q", body, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); tt.wantCode == 200 && ct != "application/json" {
				t.Fatalf("Content-Type %q, want the report's application/json", ct)
			}
		})
	}
	if n, err := testutil.GatherAndCount(reg, "work_handled_total"); err != nil || n != 1 {
		t.Fatalf("work_handled_total series = %d, %v", n, err)
	}
}

func TestDoMarshalsEveryIteration(t *testing.T) {
	// Each marshalled string is 10 letters plus two quotes.
	if got, want := Do(), Iterations*12; got != want {
		t.Fatalf("Do() marshalled %d bytes, want %d", got, want)
	}
}

// TestRandomStringConcurrent draws from the locked source from many
// goroutines, as concurrent requests do (the race detector checks the
// lock), and checks every string is n letters of the report's alphabet.
func TestRandomStringConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for range 200 {
				s := RandomString(10)
				if n := utf8.RuneCountInString(s); n != 10 || strings.Trim(s, string(letters)) != "" {
					errs <- s
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("RandomString(10) = %q, want 10 letters a-z, A-Z", s)
	}
}

func BenchmarkDo(b *testing.B) {
	for b.Loop() {
		Do()
	}
}
