package pricing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/pricing"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(refdatatest.Main(m)) }

func TestCompute(t *testing.T) {
	in := pricing.Inputs{
		Product:   refdata.Product{ID: 1, WeightG: 2500, BaseCents: 100_000},
		Brand:     refdata.Brand{MarkupBP: 1000},    // +10%: 110,000
		Rule:      refdata.PriceRule{MarkupBP: 500}, // +5%: 115,500
		Group:     refdata.Group{DiscountBP: 200},   // -2%: 113,190
		Zone:      refdata.Zone{BaseCents: 1000, PerKgCents: 400},
		Warehouse: refdata.Warehouse{HandlingCents: 300},
		Category:  refdata.Category{VATBP: 2000},
	}
	q := pricing.Compute(in)
	// shipping 1000 + 2.5 kg * 400 = 2000; net 113,190 + 2000 + 300 = 115,490; VAT 23,098
	want := pricing.Quote{Product: 1, Currency: "RUB", Base: 100_000, BrandMarkup: 10_000, RuleMarkup: 5_500, Discount: 2_310,
		Shipping: 2000, Handling: 300, VAT: 23_098, Price: 138_588}
	if q != want {
		t.Fatalf("Compute =\n%+v, want\n%+v", q, want)
	}
}

type svc struct {
	s   *pricing.Service
	h   http.Handler
	reg *prometheus.Registry
}

func start(t testing.TB, dsn string, source refdata.Source, slot string) svc {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := pricing.New(context.Background(), pricing.Config{Source: source, DB: refdata.DB{DSN: dsn, Slot: slot, Publication: slot}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	refdatatest.Run(t, s)
	return svc{s, s.Handler(), reg}
}

func (v svc) get(t *testing.T, url string) (int, string) {
	t.Helper()
	return v.getWith(t, url, "", "")
}

// getWith is get with the request header header set to value (none if
// header is "").
func (v svc) getWith(t *testing.T, url, header, value string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", url, nil)
	if header != "" {
		r.Header.Set(header, value)
	}
	v.h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestSourcesAgree asks both sources for the same prices: they must give
// the generator's own price, with 8 and 1 queries per request.
func TestSourcesAgree(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	data := refdata.Generate(refdatatest.Small)
	pg := start(t, dsn, refdata.FromPostgres, "")
	rep := start(t, dsn, refdata.FromReplica, "agree")
	const n = 40
	for i := range n {
		p := data.Products[(i*37)%len(data.Products)]
		c := data.Cities[(i*101)%len(data.Cities)]
		want := pricing.Compute(inputs(data, p, c))
		for name, v := range map[string]svc{"postgres": pg, "replica": rep} {
			code, body := v.get(t, fmt.Sprintf("/price?product=%d&city=%d", p.ID, c.ID))
			if code != 200 {
				t.Fatalf("%s: %d %s", name, code, body)
			}
			var got pricing.Quote
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s: product %d city %d:\n got %+v\nwant %+v", name, p.ID, c.ID, got, want)
			}
		}
	}
	for name, tc := range map[string]struct {
		v    svc
		want float64
	}{"postgres": {pg, 8}, "replica": {rep, 1}} {
		q, r := testkit.MetricSum(t, tc.v.reg, "db_queries_total", nil), testkit.MetricSum(t, tc.v.reg, "pricing_requests_total", nil)
		if r != n || q/r != tc.want {
			t.Errorf("%s: %v queries for %v requests, want %v per request", name, q, r, tc.want)
		}
	}
}

func inputs(d *refdata.Dataset, p refdata.Product, c refdata.City) pricing.Inputs {
	zone := d.Zones[c.ZoneID-1]
	in := pricing.Inputs{Product: p, City: c, Zone: zone,
		Brand: d.Brands[p.BrandID-1], Category: d.Categories[p.CategoryID-1],
		Warehouse: d.Warehouses[zone.WarehouseID-1], Group: d.Groups[c.GroupID-1]}
	for _, r := range d.Rules {
		if r.CategoryID == p.CategoryID && r.ZoneID == c.ZoneID {
			in.Rule = r
		}
	}
	return in
}

func TestBadInput(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	for _, source := range []refdata.Source{refdata.FromPostgres, refdata.FromReplica} {
		v := start(t, dsn, source, "bad_"+string(source))
		tests := []struct {
			url  string
			code int
			why  string
		}{
			{"/price?city=1", 400, "product is required"},
			{"/price?product=1", 400, "city is required"},
			{"/price?product=abc&city=1", 400, "product must be a positive integer"},
			{"/price?product=0&city=1", 400, "positive integer"},
			{"/price?product=1&city=99999999999", 400, "city must be a positive integer"},
			{"/price?product=99999&city=1", 404, "product 99999"},
			{"/price?product=1&city=99999", 404, "city 99999"},
			{"/price?product=1&city=1", 200, `"price":`},
		}
		for _, tt := range tests {
			code, body := v.get(t, tt.url)
			if code != tt.code || !strings.Contains(body, tt.why) {
				t.Errorf("%s %s: %d %q, want %d with %q", source, tt.url, code, body, tt.code, tt.why)
			}
		}
	}
}

func TestReplicaSeesReferenceChanges(t *testing.T) {
	dsn, pool := refdatatest.DB(t, refdatatest.Small)
	v := start(t, dsn, refdata.FromReplica, "follow")
	price := func() int64 {
		_, body := v.get(t, "/price?product=1&city=1")
		var q pricing.Quote
		json.Unmarshal([]byte(body), &q)
		return q.Handling
	}
	if _, err := pool.Exec(context.Background(), `UPDATE warehouses SET handling_cents = 424242
		WHERE id = (SELECT warehouse_id FROM zones WHERE id = (SELECT zone_id FROM cities WHERE id = 1))`); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "new handling fee in the price", func() bool { return price() == 424242 })
}

// TestServeHealth runs the whole service: /healthz is 503 while Postgres
// is unreachable, saying only "not ready" (the reason, which names the
// database's user and host, goes to the log), and the metrics are served.
func TestServeHealth(t *testing.T) {
	deadAddr := testkit.FreeAddr(t)
	ln := testkit.Listen(t)
	testkit.Background(t, "Serve", func(ctx context.Context) error {
		return pricing.Serve(ctx, server.Config{Listener: ln}, pricing.Config{Source: refdata.FromPostgres,
			DB: refdata.DB{DSN: "postgres://postgres@" + deadAddr + "/x?sslmode=disable", ConnectTimeout: 200 * time.Millisecond}})
	})
	base := "http://" + ln.Addr().String()
	var code int
	var body string
	testkit.Eventually(t, 5*time.Second, "/healthz answers", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, string(b)
		return true
	})
	if code != 503 || strings.TrimSpace(body) != "not ready" {
		t.Fatalf("/healthz with Postgres down: %d %q", code, body)
	}
	if resp, _ := testkit.Get(t, base+"/price?product=1&city=1"); resp.StatusCode != 503 {
		t.Fatalf("/price with Postgres down: %d, want 503", resp.StatusCode)
	}
	_, metrics := testkit.Get(t, base+"/metrics")
	// No connection, so no query was sent.
	for _, m := range []string{"db_queries_total 0", "pricing_requests_total 1"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
}
