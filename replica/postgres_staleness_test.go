package replica_test

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// throughProxy returns dsn with its host replaced by a proxy to it.
func throughProxy(t *testing.T, dsn string) (string, *testkit.Proxy) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := testkit.NewProxy(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

// TestStaleWhileStreamIsDown bounds staleness for real: the source's
// connections go through a proxy that resets them and refuses new ones.
// An idle replica stays fresh for several times the bound; once the
// stream is lost, Fresh fails with ErrStale after the bound (counted from
// the last confirmation, not before), and a replica that is fresh again
// holds what was written while it was cut off.
func TestStaleWhileStreamIsDown(t *testing.T) {
	const (
		bound  = 2 * time.Second
		status = 100 * time.Millisecond // run's PostgresStatusInterval
	)
	direct, db := setup(t, 100)
	dsn, proxy := throughProxy(t, direct)
	tb, _ := start(t, dsn, replica.PostgresSlot("stale"), replica.PostgresMaxStaleness(bound))
	reg := prometheus.NewRegistry()
	if err := replica.RegisterMetrics(reg, tb); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, 15*time.Second, "fresh once loaded", tb.Fresh)

	// Idle: no writes for three times the bound. The source's own status
	// requests keep it fresh.
	var oldest time.Duration
	for until := time.Now().Add(3 * bound); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
		if err := tb.Fresh(); err != nil {
			t.Fatalf("idle, with nothing pending, the replica went stale: %v", err)
		}
		oldest = max(oldest, tb.Age())
	}
	t.Logf("idle for %s: oldest age seen %s", 3*bound, oldest)

	// The stream lost: every connection reset, new ones refused.
	lastConfirmed := time.Now().Add(-tb.Age())
	proxy.SetDown(true)
	lost := time.Now()
	exec(t, db, `UPDATE items SET qty = -1 WHERE id = 1`) // the replica cannot see it
	var stale *replica.StaleError
	testkit.Eventually(t, 30*time.Second, "ErrStale after the stream is lost", func() bool {
		err := tb.Fresh()
		return errors.Is(err, replica.ErrStale) && errors.As(err, &stale)
	})
	staleAt := time.Now()
	if early := lastConfirmed.Add(bound).Sub(staleAt); early > time.Millisecond {
		t.Errorf("stale %s before the bound had passed since the last confirmation", early)
	}
	if stale.Age < bound || stale.Max != bound || stale.Table != "items" {
		t.Errorf("StaleError = %+v, want Age > %s, Max %s, Table items", stale, bound, bound)
	}
	if got := testkit.MetricSum(t, reg, "replica_staleness_seconds", map[string]string{"table": "items"}); got < bound.Seconds() {
		t.Errorf("replica_staleness_seconds = %v while stale, want at least %v", got, bound.Seconds())
	}
	t.Logf("stream lost -> ErrStale: %s (bound %s, status interval %s; last confirmation %s before the loss)",
		staleAt.Sub(lost).Round(time.Millisecond), bound, status, lost.Sub(lastConfirmed).Round(time.Millisecond))
	if v, ok := tb.Get(1); !ok || v.Qty == -1 {
		t.Fatalf("cut off, the replica has item 1 = %+v, %v", v, ok)
	}

	// Back: fresh again only once caught up, so the write made while it
	// was down is there the moment Fresh says so.
	proxy.SetDown(false)
	testkit.EventuallyNil(t, 30*time.Second, "fresh again once the stream is back", tb.Fresh)
	if v, _ := tb.Get(1); v.Qty != -1 {
		t.Fatalf("fresh again, yet item 1 = %+v: the write made while it was cut off is missing", v)
	}
}

// TestMaxStalenessValidated: a bound the source cannot keep while idle
// (not longer than its status interval) or a negative one is refused
// with what to give instead.
func TestMaxStalenessValidated(t *testing.T) {
	tb := replica.NewTable[int32, item]("items")
	for _, d := range []time.Duration{-time.Second, 500 * time.Millisecond, time.Second} {
		_, err := replica.NewPostgresSource("postgres://u@localhost/db", []replica.Binding{bindItems(tb)},
			replica.PostgresStatusInterval(time.Second), replica.PostgresMaxStaleness(d))
		if err == nil {
			t.Errorf("PostgresMaxStaleness(%s) with a 1s status interval accepted", d)
		}
	}
	if err := tb.Fresh(); err != nil {
		t.Errorf("without a bound Fresh = %v, want nil", err)
	}
	if _, err := replica.NewPostgresSource("postgres://u@localhost/db", []replica.Binding{bindItems(tb)},
		replica.PostgresMaxStaleness(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := tb.Fresh(); !errors.Is(err, replica.ErrStale) {
		t.Errorf("never loaded, with a bound: Fresh = %v, want ErrStale", err)
	}
}
