package replica_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/replica"
)

// runUntilEnd runs src and returns Run's error, after calling during
// (if not nil) while it runs; it fails the test if Run does not end
// within a minute.
func runUntilEnd(t *testing.T, src interface{ Run(context.Context) error }, during func()) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- src.Run(ctx) }()
	if during != nil {
		during()
	}
	err := <-ran
	if ctx.Err() != nil {
		t.Fatal("Run did not end within a minute")
	}
	return err
}

// pgSource is a source for tb on dsn.
func pgSource(t *testing.T, dsn string, tb *replica.Table[int32, item]) *replica.PostgresSource {
	t.Helper()
	src, err := replica.NewPostgresSource(dsn, []replica.Binding{bindItems(tb)}, replica.PostgresStatusInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestMemoryBudgetFailsLoad: a table whose load passes its budget ends
// Run with an error naming the table, its rows and the budget, before
// the whole table is in memory, and the table is not Ready.
func TestMemoryBudgetFailsLoad(t *testing.T) {
	dsn, _ := setup(t, 20_000)
	tb := replica.NewTable[int32, item]("items", replica.MaxBytes(200_000))
	err := runUntilEnd(t, pgSource(t, dsn, tb), nil)
	if !errors.Is(err, replica.ErrMemoryBudget) || !containsAll(err.Error(), "table items", "rows", "budget of 200000", "replica.MaxBytes") {
		t.Fatalf("Run: %v, want ErrMemoryBudget naming the table, rows and budget", err)
	}
	if tb.Ready() || !errors.Is(tb.Err(), replica.ErrMemoryBudget) || tb.Len() != 0 {
		t.Fatalf("after the failed load: ready %v, err %v, %d rows; want not ready, the budget's error, no rows", tb.Ready(), tb.Err(), tb.Len())
	}
}

// TestMemoryBudgetFailsGrowth: a transaction that would take a loaded
// table past its budget is not applied, and Run ends saying why.
func TestMemoryBudgetFailsGrowth(t *testing.T) {
	dsn, db := setup(t, 100)
	tb := replica.NewTable[int32, item]("items", replica.MaxBytes(40_000))
	err := runUntilEnd(t, pgSource(t, dsn, tb), func() {
		waitReady(t, tb)
		if st := tb.Stats(); st.Bytes <= 0 || st.Bytes > 40_000 {
			t.Errorf("loaded: %d bytes (%.0f a row), want within the budget", st.Bytes, st.BytesPerRow)
		}
		exec(t, db, `INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(101, 1000) g`)
	})
	if !errors.Is(err, replica.ErrMemoryBudget) || !containsAll(err.Error(), "table items", "1000 rows", "budget of 40000") {
		t.Fatalf("Run: %v, want ErrMemoryBudget naming the table, 1000 rows and the budget", err)
	}
	if tb.Len() != 100 || tb.Ready() {
		t.Fatalf("after the transaction over budget: %d rows, ready %v; want the 100 rows of before, not ready", tb.Len(), tb.Ready())
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestMongoMemoryBudget: the same for a MongoSource: a load past the
// budget ends Run; so does a growth, which is not applied.
func TestMongoMemoryBudget(t *testing.T) {
	m := startStandIn(t)
	run := func(tb *replica.Table[int32, item], db string, during func()) error {
		t.Helper()
		src, err := replica.NewMongoSource(m.URI, db, []replica.Binding{bindMongoItems(tb)},
			replica.MongoMaxAwait(200*time.Millisecond), replica.MongoPollInterval(5*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return runUntilEnd(t, src, during)
	}
	db, _ := mongoItems(t, m, 3000)
	tb := replica.NewTable[int32, item]("items", replica.MaxBytes(50_000))
	if err := run(tb, db, nil); !errors.Is(err, replica.ErrMemoryBudget) || !containsAll(err.Error(), "table items", "budget of 50000") {
		t.Fatalf("load past the budget: Run: %v, want ErrMemoryBudget", err)
	}
	db, coll := mongoItems(t, m, 100)
	tb = replica.NewTable[int32, item]("items", replica.MaxBytes(50_000))
	err := run(tb, db, func() {
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := tb.WaitReady(wctx); err != nil {
			t.Fatalf("not ready: %v", err)
		}
		docs := make([]any, 0, 1000)
		for i := range 1000 {
			docs = append(docs, itemDoc(int32(1000+i), "new", 1))
		}
		if _, err := coll.InsertMany(wctx, docs); err != nil {
			t.Fatal(err)
		}
	})
	if st := tb.Stats(); !errors.Is(err, replica.ErrMemoryBudget) || st.Bytes > 50_000 || st.Ready {
		t.Fatalf("growth past the budget: Run: %v, %d rows in %d bytes, ready %v; want ErrMemoryBudget, the rows within it, not ready", err, st.Rows, st.Bytes, st.Ready)
	}
}
