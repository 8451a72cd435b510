package replicaexp

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/replica"
)

func TestMain(m *testing.M) { os.Exit(refdatatest.Main(m)) }

// TestWriteLoadIsSeen runs the freshness measurement's parts against a
// real Postgres: every write of the load reaches a replica exactly once,
// and the window's commit-to-visible delays are measured.
func TestWriteLoadIsSeen(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cust := refdata.NewCustomers()
	db := refdata.DB{DSN: dsn}
	db.SetDefaults("fresh")
	rep, err := refdata.NewReplica(db, cust, prometheus.NewRegistry(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { rep.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if err := waitFor(ctx, 20*time.Second, func() bool { return rep.Loaded() && rep.Ready() == nil }); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const rate, dur = 500, 2 * time.Second
	start := time.Now().Add(50 * time.Millisecond)
	from, to := start.Add(500*time.Millisecond), start.Add(dur)
	rec := newLagRecorder(from, to)
	var seen atomic.Int64 // upserts committed since the load started
	cust.Table.OnChange(func(c replica.Change[int32, refdata.Customer]) {
		if c.Op == replica.Upsert {
			if !c.Commit.Before(start) {
				seen.Add(1)
			}
			rec.observe(c.Commit, time.Now())
		}
	})
	ws := writeLoad(ctx, rate, start, to, pgUpdate(pool, refdatatest.Small.Customers))
	if n := ws.done.Load(); n != rate*int64(dur/time.Second) || ws.failed.Load() != 0 {
		t.Fatalf("%d writes done, %d failed, want %d", n, ws.failed.Load(), rate*int64(dur/time.Second))
	}
	if err := waitFor(ctx, 10*time.Second, func() bool { return !rec.lastCommit().Before(to.Add(-100 * time.Millisecond)) }); err != nil {
		t.Fatalf("the replica did not catch up: last commit seen %v before the end", to.Sub(rec.lastCommit()))
	}
	// Every write reaches the replica, once: a count, not a rate, so that
	// a loaded machine (the writer's late sends) cannot fail it; the rate
	// the load kept is the lab row's business.
	want := rate * int64(dur/time.Second)
	if err := waitFor(ctx, 10*time.Second, func() bool { return seen.Load() >= want }); err != nil {
		t.Fatalf("the replica saw %d of the %d writes", seen.Load(), want)
	}
	// One more write, as a barrier: changes arrive in commit order, so a
	// duplicate of a load write would arrive before it does.
	barrier := time.Now()
	if _, err := pool.Exec(ctx, `UPDATE customers SET credit_limit_cents = credit_limit_cents + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 10*time.Second, func() bool { return !rec.lastCommit().Before(barrier) }); err != nil {
		t.Fatal("the replica did not see the barrier write")
	}
	if n := seen.Load() - 1; n != want {
		t.Errorf("the replica saw %d changes for %d writes", n, want)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("%d changes in the %v window: p50 %v µs, p99 %v µs, max %v µs; %d late sends",
		rec.h.TotalCount(), to.Sub(from), rec.h.ValueAtQuantile(50), rec.h.ValueAtQuantile(99), rec.h.Max(), ws.late.Load())
	if rec.h.TotalCount() == 0 {
		t.Error("no commit-to-visible delay measured in the window")
	}
}
