package catalog_test

import (
	"net/http/httptest"
	"testing"

	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
)

// BenchmarkHandler is the catalog's own cost per request, served from the
// replica, without the network and HTTP parsing: what it adds to a hello
// world's ceiling.
func BenchmarkHandler(b *testing.B) {
	dsn, _ := refdatatest.DB(b, refdatatest.Small)
	h := start(b, dsn, refdata.FromReplica, "bench")
	for _, bc := range []struct{ name, url string }{
		{"get", "/customers/2042"},
		{"list=20", "/customers?region=Omsk&limit=20"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", bc.url, nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
