package pricing_test

import (
	"net/http/httptest"
	"testing"

	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
)

// BenchmarkHandler is one price request's cost in the service, network
// and HTTP parsing left out (Postgres round trips included).
func BenchmarkHandler(b *testing.B) {
	dsn, _ := refdatatest.DB(b, refdatatest.Small)
	for _, source := range []refdata.Source{refdata.FromPostgres, refdata.FromReplica} {
		b.Run("source="+string(source), func(b *testing.B) {
			v := start(b, dsn, source, "bench_"+string(source))
			req := httptest.NewRequest("GET", "/price?product=42&city=17", nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				v.h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
