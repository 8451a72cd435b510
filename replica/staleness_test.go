package replica_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// TestStaleWhileStreamIsDown bounds staleness for real: the source's
// connections go through a proxy that resets them and refuses new ones
// (see staleWhileCutOff).
func TestStaleWhileStreamIsDown(t *testing.T) {
	const bound = 2 * time.Second
	direct, db := setup(t, 100)
	dsn, proxy := testkit.ProxyURL(t, direct)
	tb, _ := start(t, dsn, replica.PostgresSlot("stale"), replica.PostgresMaxStaleness(bound))
	staleWhileCutOff(t, tb, bound, proxy.SetDown, func() {
		// A backlog of transactions before the one checked: fresh again
		// must mean caught up, not merely streaming.
		for range 1000 {
			exec(t, db, `UPDATE items SET qty = qty + 1 WHERE id = 2`)
		}
		// Flushed when it returns, with everything before it: this
		// Postgres runs synchronous_commit off, and the server streams a
		// commit only once it is flushed (see the package doc).
		exec(t, db, `BEGIN; SET LOCAL synchronous_commit = on; UPDATE items SET qty = -1 WHERE id = 1; COMMIT`)
	})
}

// staleWhileCutOff checks tb, whose source's connections setDown cuts
// and refuses, against its staleness bound: fresh while idle for three
// times the bound; stale once cut off, not before the bound has passed
// since the last confirmation; fresh again once back and caught up, with
// what write (setting item 1's qty to -1) did while it was cut off.
func staleWhileCutOff(t *testing.T, tb *replica.Table[int32, item], bound time.Duration, setDown func(bool), write func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := replica.RegisterMetrics(reg, tb); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, 15*time.Second, "fresh once loaded", tb.Fresh)

	// Idle: no writes for three times the bound. The source's own
	// requests to the server keep it fresh.
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
	setDown(true)
	lost := time.Now()
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
	t.Logf("stream lost -> ErrStale: %s (bound %s; last confirmation %s before the loss)",
		staleAt.Sub(lost).Round(time.Millisecond), bound, lost.Sub(lastConfirmed).Round(time.Millisecond))
	write() // the replica cannot see it
	if v, ok := tb.Get(1); !ok || v.Qty == -1 {
		t.Fatalf("cut off, the replica has item 1 = %+v, %v", v, ok)
	}

	// Back: fresh again only once caught up, so the write made while it
	// was cut off is there the moment Fresh says so.
	setDown(false)
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

// TestMongoStaleWhileStreamIsDown: the same for a MongoSource, whose idle
// stream confirms it is current at every empty batch.
func TestMongoStaleWhileStreamIsDown(t *testing.T) {
	// MongoMaxAwait is 200ms in startMongoSource: an idle stream confirms
	// about five times a second, so 2 s leaves room for a loaded machine.
	const bound = 2 * time.Second
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 100)
	proxy := newWireProxy(t, m.Addr)
	tb, _ := startMongoSource(t, proxy.URI(), db, replica.MongoMaxStaleness(bound))
	staleWhileCutOff(t, tb, bound, proxy.setDown, func() {
		if _, err := coll.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: int32(1)}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "qty", Value: int32(-1)}}}}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBlackHoledStreamReconnects: the network drops every byte of the
// replication connection without closing it (no read or write fails).
// The replica goes stale after its bound, and the source, hearing
// nothing although it asks the server to reply, takes the connection for
// dead and reconnects, instead of waiting for TCP to give up (minutes).
func TestBlackHoledStreamReconnects(t *testing.T) {
	const bound = 2 * time.Second
	direct, db := setup(t, 50)
	dsn, proxy := testkit.ProxyURL(t, direct)
	tb, _ := start(t, dsn, replica.PostgresSlot("black_hole"), replica.PostgresMaxStaleness(bound))
	testkit.EventuallyNil(t, 15*time.Second, "fresh once loaded", tb.Fresh)

	proxy.SetBlackHole(true)
	holed := time.Now()
	// Long before the network is back: this Postgres runs with
	// synchronous_commit off, and the server streams a commit only once
	// it is flushed.
	exec(t, db, `UPDATE items SET qty = -1 WHERE id = 1`)
	testkit.Eventually(t, 30*time.Second, "ErrStale while black-holed", func() bool { return errors.Is(tb.Fresh(), replica.ErrStale) })
	testkit.Eventually(t, 30*time.Second, "the source takes the silent connection for dead", func() bool { return !tb.Ready() && tb.Err() != nil })
	t.Logf("black-holed -> not ready after %s: %v", time.Since(holed).Round(time.Millisecond), tb.Err())

	proxy.SetBlackHole(false)
	testkit.EventuallyNil(t, 30*time.Second, "fresh again once the network is back", tb.Fresh)
	if v, _ := tb.Get(1); v.Qty != -1 {
		t.Fatalf("fresh again, yet item 1 = %+v: the write made while black-holed is missing", v)
	}
}
