package catalog

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/services/refdata"
)

// TestEncodingMatchesEncodingJSON: a customer's answer is byte for byte
// what encoding/json's Encoder wrote before it: on every customer of the
// seed, and on strings and times that need escaping or another format.
func TestEncodingMatchesEncodingJSON(t *testing.T) {
	customers := refdata.Generate(refdata.Size{Customers: 2000, Products: 1}).Customers
	base := customers[0]
	moscow := time.FixedZone("MSK", 3*3600)
	for _, s := range []string{
		"", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
		"Ёлки-Палки ООО", "emoji 🦊", "bad utf-8 \xff\xfe and \xe2\x82", "line\u2028para\u2029", "/slash's",
	} {
		c := base
		c.Name, c.Email = s, s
		customers = append(customers, c)
	}
	for _, at := range []time.Time{
		{}, time.Date(2025, 1, 3, 22, 41, 0, 0, time.UTC), time.Date(2025, 1, 3, 22, 41, 0, 123456789, moscow),
		time.Date(2025, 1, 3, 22, 41, 0, 120000000, time.Local), time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC),
	} {
		c := base
		c.UpdatedAt = at
		customers = append(customers, c)
	}
	for _, c := range customers {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(c); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		writeCustomer(w, c)
		if got := w.Body.String(); got != want.String() {
			t.Fatalf("customer %d:\n got %q\nwant %q", c.ID, got, want.String())
		}
		if got := w.Header().Get("Content-Type"); got != "application/json" {
			t.Fatalf("Content-Type %q", got)
		}
	}
}

// TestEncodingUnwritableTime: a time encoding/json refuses (a five-digit
// year) gets encoding/json's own answer, as before, not a made-up one.
func TestEncodingUnwritableTime(t *testing.T) {
	c := refdata.Customer{ID: 1, Name: "n", Region: "r", UpdatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	var want bytes.Buffer
	json.NewEncoder(&want).Encode(c)
	w := httptest.NewRecorder()
	writeCustomer(w, c)
	if w.Body.String() != want.String() {
		t.Fatalf("got %q, want %q", w.Body.String(), want.String())
	}
}

// discard is a ResponseWriter that keeps its header and drops the body.
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

func BenchmarkEncode(b *testing.B) {
	c := refdata.Generate(refdata.Size{Customers: 1, Products: 1}).Customers[0]
	w := discard{http.Header{}}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(w, c)
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeCustomer(w, c)
		}
	})
}
