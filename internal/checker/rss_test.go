package checker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/checker"
)

// GatewayRSS reads process_resident_memory_bytes whatever comes around
// it, and says so when the address serves no such metric.
func TestGatewayRSS(t *testing.T) {
	body := "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 3.3554432e+07\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/other" {
			fmt.Fprintln(w, "go_goroutines 7")
			return
		}
		fmt.Fprint(w, "# TYPE go_goroutines gauge\ngo_goroutines 7\n"+body)
	}))
	defer srv.Close()
	rss, err := checker.GatewayRSS(context.Background(), srv.URL+"/metrics")
	if err != nil || rss != 32<<20 {
		t.Fatalf("GatewayRSS = %d, %v; want %d", rss, err, 32<<20)
	}
	if _, err := checker.GatewayRSS(context.Background(), srv.URL+"/other"); err == nil || !strings.Contains(err.Error(), "no process_resident_memory_bytes") {
		t.Errorf("err = %v; want the missing metric named", err)
	}
}
