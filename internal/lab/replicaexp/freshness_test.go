package replicaexp

import (
	"context"
	"os"
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
// real Postgres: the write load keeps its rate, and a replica sees every
// write of the window with a commit-to-visible delay.
func TestWriteLoadIsSeen(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cust := refdata.NewCustomers()
	db := refdata.DB{DSN: dsn}
	db.SetDefaults("fresh")
	rep, err := refdata.NewReplica(db, cust, prometheus.NewRegistry(), nil)
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
	cust.Table.OnChange(func(c replica.Change[int32, refdata.Customer]) {
		if c.Op == replica.Upsert {
			rec.observe(c.Commit, time.Now())
		}
	})
	ws := writeLoad(ctx, pool, rate, start, to, refdatatest.Small.Customers)
	if n := ws.done.Load(); n != rate*int64(dur/time.Second) || ws.failed.Load() != 0 {
		t.Fatalf("%d writes done, %d failed, want %d", n, ws.failed.Load(), rate*int64(dur/time.Second))
	}
	if err := waitFor(ctx, 10*time.Second, func() bool { return !rec.lastCommit().Before(to.Add(-100 * time.Millisecond)) }); err != nil {
		t.Fatalf("the replica did not catch up: last commit seen %v before the end", to.Sub(rec.lastCommit()))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := rec.h.TotalCount()
	t.Logf("%d changes in the window: p50 %v µs, p99 %v µs, max %v µs; %d late sends",
		seen, rec.h.ValueAtQuantile(50), rec.h.ValueAtQuantile(99), rec.h.Max(), ws.late.Load())
	if want := int64(rate * 3 / 2); seen < want*9/10 || seen > want*11/10 {
		t.Errorf("saw %d changes committed in the 1.5 s window, want about %d", seen, want)
	}
}
