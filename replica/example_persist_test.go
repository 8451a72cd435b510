package replica_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/replica"
)

// ExamplePostgresPersist starts a durable replica twice: the first start
// has no file and loads a snapshot; the second loads the file the first
// wrote when Run ended, and streams from its position.
func ExamplePostgresPersist() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := os.Getenv("DATABASE_URL")
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS products (id bigint PRIMARY KEY, name text NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "replica")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	start := func() (refused string) {
		products := replica.NewTable[int64, string]("public.products")
		src, err := replica.NewPostgresSource(dsn, []replica.Binding{replica.Bind(products, productID, productName)},
			replica.PostgresSlot("example_durable"), // this replica's own, stable across restarts
			replica.PostgresPersist(filepath.Join(dir, "products.replica"), time.Minute))
		if err != nil {
			log.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- src.Run(rctx) }()
		defer func() { stop(); <-ran }() // Run writes the file and keeps the slot
		if err := products.WaitReady(ctx); err != nil {
			log.Fatal(err)
		}
		_, refused = src.DiskStart()
		return refused
	}
	fmt.Println(start())       // no file yet
	fmt.Println(start() == "") // from the file
	// Retire the replica: drop its slot (a slot still held for a moment
	// by the ended connection stays; the next first start replaces it).
	_, err = db.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'example_durable' AND NOT active`)
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// file_missing
	// true
}

func productID(r replica.Row) (int64, error) {
	id, ok := r["id"].(int64)
	if !ok {
		return 0, fmt.Errorf("id is %T, want int64", r["id"])
	}
	return id, nil
}

func productName(r replica.Row) (string, error) {
	name, ok := r["name"].(string)
	if !ok {
		return "", fmt.Errorf("name is %T, want string", r["name"])
	}
	return name, nil
}
