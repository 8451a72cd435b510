package catalog_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestRoutes: a plain GET /customers/{id} (served without the mux's
// matching) and the paths around it answer as the mux routes them, and
// the request metrics label each by its route.
func TestRoutes(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	reg := prometheus.NewRegistry()
	h := server.Handler(server.Config{Registry: reg}, start(t, dsn, refdata.FromReplica, "routes"))
	for _, tt := range []struct {
		method, path string
		code         int
		body         string // a part of it
	}{
		{"GET", "/customers/42", 200, `{"id":42,`},
		{"GET", "/customers/%34%32", 200, `{"id":42,`},
		{"HEAD", "/customers/42", 200, ""},
		{"POST", "/customers/42", 405, "Method Not Allowed"},
		{"GET", "/customers/42/", 404, "404 page not found"},
		{"GET", "/customers/4%2F2", 400, "positive integer"},
		{"GET", "/customers/", 404, "404 page not found"},
		{"GET", "/customers/x", 400, "positive integer"},
		{"GET", "/customers/999999", 404, "customer 999999"},
		{"GET", "/customers/./42", 307, ""}, // cleaned by the server's mux, before the catalog
		{"GET", "/customers?region=Omsk&limit=1", 200, `"region":"Omsk"`},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
		if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.body) {
			t.Errorf("%s %s: %d %q, want %d with %q", tt.method, tt.path, w.Code, w.Body.String(), tt.code, tt.body)
		}
		if w.Code != 307 && w.Header().Get(refdata.AgeHeader) == "" {
			t.Errorf("%s %s: no %s header", tt.method, tt.path, refdata.AgeHeader)
		}
	}
	for _, tt := range []struct {
		path, code string
		want       float64
	}{
		{"GET /customers/{id}", "200", 3}, // two GETs and the HEAD
		{"GET /customers/{id}", "400", 2},
		{"GET /customers/{id}", "404", 1},
		{"GET /customers", "200", 1},
	} {
		if got := testkit.MetricSum(t, reg, "http_requests_total", map[string]string{"path": tt.path, "code": tt.code}); got != tt.want {
			t.Errorf("http_requests_total{path=%q,code=%q} = %v, want %v", tt.path, tt.code, got, tt.want)
		}
	}
}
