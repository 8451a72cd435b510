package replica_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/replica"
)

// Example keeps an in-memory copy of a Postgres table fresh by change
// data capture. It needs a server with wal_level=logical, such as
// DATABASE_URL="$(hlab deps up postgres)".
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := os.Getenv("DATABASE_URL")
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS products (id bigint PRIMARY KEY, name text NOT NULL);
		INSERT INTO products VALUES (1, 'tea') ON CONFLICT (id) DO UPDATE SET name = 'tea'`); err != nil {
		log.Fatal(err)
	}

	products := replica.NewTable[int64, string]("public.products")
	src, err := replica.NewPostgresSource(dsn, []replica.Binding{replica.Bind(products,
		func(r replica.Row) (int64, error) {
			id, ok := r["id"].(int64)
			if !ok {
				return 0, fmt.Errorf("id is %T, want int64", r["id"])
			}
			return id, nil
		},
		func(r replica.Row) (string, error) {
			name, ok := r["name"].(string)
			if !ok {
				return "", fmt.Errorf("name is %T, want string", r["name"])
			}
			return name, nil
		},
	)}, replica.PostgresSlot("example"))
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- src.Run(ctx) }() // until ctx ends
	defer func() { cancel(); <-ran }()  // Run then drops its slot
	if err := products.WaitReady(ctx); err != nil {
		log.Fatal(err) // the snapshot did not load: the error says why
	}
	name, _ := products.Get(1) // from memory: no query, no lock
	fmt.Println(name)

	if _, err := db.Exec(ctx, `UPDATE products SET name = 'green tea' WHERE id = 1`); err != nil {
		log.Fatal(err)
	}
	for name == "tea" && ctx.Err() == nil { // the change arrives within milliseconds
		time.Sleep(10 * time.Millisecond)
		name, _ = products.Get(1)
	}
	fmt.Println(name)
	// Output:
	// tea
	// green tea
}

// ExamplePostgresSource_WaitFor reads its own write: it commits, reads
// the server's position after the commit, and waits until the replica
// has reached it.
func ExamplePostgresSource_WaitFor() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := os.Getenv("DATABASE_URL")
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS prices (id bigint PRIMARY KEY, cents bigint NOT NULL);
		INSERT INTO prices VALUES (1, 100) ON CONFLICT (id) DO UPDATE SET cents = 100`); err != nil {
		log.Fatal(err)
	}
	prices := replica.NewTable[int64, int64]("public.prices")
	src, err := replica.NewPostgresSource(dsn, []replica.Binding{replica.Bind(prices,
		func(r replica.Row) (int64, error) { return r["id"].(int64), nil },
		func(r replica.Row) (int64, error) { return r["cents"].(int64), nil },
	)}, replica.PostgresSlot("example_wait"), replica.PostgresPublication("example_wait"))
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- src.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	// The write, committed as PostgreSQL does by default (flushed), so
	// the server streams it at once.
	if _, err := db.Exec(ctx, `SET synchronous_commit = on`); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE prices SET cents = 250 WHERE id = 1`); err != nil {
		log.Fatal(err)
	}
	pos, err := replica.PostgresWritePosition(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	if err := src.WaitFor(ctx, pos); err != nil {
		log.Fatal(err) // ctx ended first: the error says where the replica is
	}
	cents, _ := prices.Get(1)
	fmt.Println(cents)
	// Output: 250
}

// ExampleMaxBytes bounds a table's memory: a load or a transaction that
// would take it past 64 MiB ends the source's Run with an error wrapping
// ErrMemoryBudget, rather than the process growing until it is killed.
func ExampleMaxBytes() {
	prices := replica.NewTable[int64, int64]("public.prices", replica.MaxBytes(64<<20))
	fmt.Println(prices.Stats().Bytes) // estimated at each load and merge
	// Output: 0
}
