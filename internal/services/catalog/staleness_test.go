package catalog_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/catalog"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestStaleReplicaAnswers503 cuts the catalog off from Postgres (a proxy
// that resets its connections and refuses new ones): once the replica is
// older than --max-staleness, requests answer 503 with Retry-After and a
// body naming the age, and /readyz fails; fresh again, they answer 200.
// Every answer carries the age in X-Replica-Age.
func TestStaleReplicaAnswers503(t *testing.T) {
	const bound = 2 * time.Second
	direct, _ := refdatatest.DB(t, refdatatest.Small)
	dsn, proxy := testkit.ProxyURL(t, direct)
	s, err := catalog.New(context.Background(), catalog.Config{
		DB: refdata.DB{DSN: dsn, Slot: "catalog_stale", Publication: "catalog_stale"}, MaxStaleness: bound})
	if err != nil {
		t.Fatal(err)
	}
	refdatatest.Run(t, s)
	h := server.Handler(server.Config{Ready: s.Ready, Fresh: s.Fresh}, s.Handler())
	do := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w
	}
	age := func(w *httptest.ResponseRecorder) time.Duration {
		t.Helper()
		v := w.Header().Get(refdata.AgeHeader)
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || !strings.Contains(v, ".") || len(v)-strings.Index(v, ".") != 4 {
			t.Fatalf("%s = %q, want seconds to the millisecond", refdata.AgeHeader, v)
		}
		return time.Duration(sec * float64(time.Second))
	}

	testkit.Eventually(t, 15*time.Second, "200 and /readyz ok once loaded", func() bool {
		return do("/customers/1").Code == 200 && do("/readyz").Code == 200
	})
	if w := do("/customers?region=north"); w.Code != 200 || age(w) >= bound {
		t.Fatalf("fresh: listing %d, age %s", w.Code, age(w))
	}

	proxy.SetDown(true)
	var w *httptest.ResponseRecorder
	testkit.Eventually(t, 30*time.Second, "503 once the replica is older than its bound", func() bool {
		w = do("/customers/1")
		return w.Code == http.StatusServiceUnavailable && strings.Contains(w.Body.String(), "ago")
	})
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if a := age(w); a < bound {
		t.Errorf("stale answer's %s = %s, below the bound %s", refdata.AgeHeader, a, bound)
	}
	if !strings.Contains(w.Body.String(), "too old") {
		t.Errorf("stale body %q does not say why", w.Body.String())
	}
	if r := do("/readyz"); r.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while stale = %d %q, want 503", r.Code, r.Body.String())
	}
	t.Logf("stale: %d %s=%s %q", w.Code, refdata.AgeHeader, w.Header().Get(refdata.AgeHeader), strings.TrimSpace(w.Body.String()))

	proxy.SetDown(false)
	testkit.Eventually(t, 30*time.Second, "200 and /readyz ok again once the stream is back", func() bool {
		return do("/customers/1").Code == 200 && do("/readyz").Code == 200
	})
	if w := do("/customers/1"); age(w) >= bound {
		t.Errorf("fresh again, %s = %s", refdata.AgeHeader, age(w))
	}
}
