package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/services/catalog"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(refdatatest.Main(m)) }

func start(t testing.TB, dsn string, source refdata.Source, slot string) http.Handler {
	t.Helper()
	s, err := catalog.New(context.Background(), catalog.Config{Source: source, DB: refdata.DB{DSN: dsn, Slot: slot, Publication: slot}})
	if err != nil {
		t.Fatal(err)
	}
	refdatatest.Run(t, s)
	return s.Handler()
}

func get(t *testing.T, h http.Handler, url string, into any) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", url, nil))
	if w.Code == 200 && into != nil {
		if err := json.Unmarshal(w.Body.Bytes(), into); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
	}
	return w.Code, w.Body.String()
}

func same(a, b refdata.Customer) bool {
	eq := a.UpdatedAt.Equal(b.UpdatedAt)
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	return eq && a == b
}

// TestSourcesAgree: the replica and Postgres answer alike, and as the
// seed says: customers by id, and every region's listing in name order.
func TestSourcesAgree(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	data := refdata.Generate(refdatatest.Small)
	sources := map[string]http.Handler{
		"postgres": start(t, dsn, refdata.FromPostgres, ""),
		"replica":  start(t, dsn, refdata.FromReplica, "agree"),
	}
	for i := 0; i < len(data.Customers); i += 97 {
		want := data.Customers[i]
		for name, h := range sources {
			var got refdata.Customer
			if code, body := get(t, h, fmt.Sprintf("/customers/%d", want.ID), &got); code != 200 || !same(got, want) {
				t.Fatalf("%s: customer %d: %d %s, want %+v", name, want.ID, code, body, want)
			}
		}
	}
	sorted := slices.Clone(data.Customers)
	slices.SortFunc(sorted, func(a, b refdata.Customer) int {
		if refdata.CustomerLess(a, b) {
			return -1
		}
		return 1
	})
	for _, region := range refdata.Regions {
		var want []refdata.Customer
		for _, c := range sorted {
			if c.Region == region && len(want) < 7 {
				want = append(want, c)
			}
		}
		for name, h := range sources {
			var got catalog.Listing
			code, body := get(t, h, "/customers?limit=7&region="+region, &got)
			if code != 200 || got.Region != region || len(got.Customers) != len(want) {
				t.Fatalf("%s: region %s: %d %s", name, region, code, body)
			}
			for i := range want {
				if !same(got.Customers[i], want[i]) {
					t.Fatalf("%s: region %s, #%d: %+v, want %+v", name, region, i, got.Customers[i], want[i])
				}
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	for _, source := range []refdata.Source{refdata.FromPostgres, refdata.FromReplica} {
		h := start(t, dsn, source, "bad_"+string(source))
		tests := []struct {
			url  string
			code int
			why  string
		}{
			{"/customers/abc", 400, "customer id must be a positive integer"},
			{"/customers/0", 400, "positive integer"},
			{"/customers/99999999999", 400, "positive integer"},
			{"/customers/999999", 404, "customer 999999"},
			{"/customers", 400, "region is required"},
			{"/customers?region=" + strings.Repeat("x", 65), 400, "at most 64 bytes"},
			{"/customers?region=Omsk&limit=0", 400, "limit must be 1-100"},
			{"/customers?region=Omsk&limit=101", 400, "limit must be 1-100"},
			{"/customers?region=Omsk&limit=x", 400, "limit must be 1-100"},
			{"/customers?region=Nowhere", 200, `"customers":[]`},
			{"/customers?region=Omsk", 200, `"region":"Omsk"`},
		}
		for _, tt := range tests {
			code, body := get(t, h, tt.url, nil)
			if code != tt.code || !strings.Contains(body, tt.why) {
				t.Errorf("%s %s: %d %q, want %d with %q", source, tt.url, code, body, tt.code, tt.why)
			}
		}
	}
}

// TestReplicaKeepsOrderUnderChanges renames a customer so it sorts first
// in its region: the replica's ordered index must follow.
func TestReplicaKeepsOrderUnderChanges(t *testing.T) {
	dsn, pool := refdatatest.DB(t, refdatatest.Small)
	h := start(t, dsn, refdata.FromReplica, "order")
	var id int32
	if err := pool.QueryRow(context.Background(), `UPDATE customers SET name = '  First LLC'
		WHERE id = (SELECT max(id) FROM customers WHERE region = 'Omsk') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "renamed customer listed first", func() bool {
		var l catalog.Listing
		get(t, h, "/customers?region=Omsk&limit=1", &l)
		return len(l.Customers) == 1 && l.Customers[0].ID == id
	})
	if _, err := pool.Exec(context.Background(), `DELETE FROM customers WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "deleted customer gone", func() bool {
		code, _ := get(t, h, fmt.Sprintf("/customers/%d", id), nil)
		return code == 404
	})
}
