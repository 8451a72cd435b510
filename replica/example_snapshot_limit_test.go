package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/highload-lab/hlab/replica"
)

// Fifty pods of a service that restart together load their snapshots
// four at a time; a pod waiting for its turn says so, not Ready.
func ExamplePostgresSnapshotLimit() {
	prices := replica.NewTable[int64, string]("public.prices")
	src, err := replica.NewPostgresSource(os.Getenv("DATABASE_URL"),
		[]replica.Binding{replica.Bind(prices, priceID, priceName)},
		replica.PostgresSlot(os.Getenv("POD_NAME")), // each pod its own slot
		replica.PostgresPublication("prices"),       // the pods share its turns
		replica.PostgresSnapshotLimit(4))
	if err != nil {
		log.Fatal(err)
	}
	go src.Run(context.Background())
	if err := prices.Err(); errors.Is(err, replica.ErrSnapshotQueued) {
		fmt.Println(err) // replica: waiting for a turn to load a snapshot for 1.2s: 4 loads ...
	}
}

func priceID(r replica.Row) (int64, error) {
	id, ok := r["id"].(int64)
	if !ok {
		return 0, fmt.Errorf("id is %T, want int64", r["id"])
	}
	return id, nil
}

func priceName(r replica.Row) (string, error) {
	name, ok := r["name"].(string)
	if !ok {
		return "", fmt.Errorf("name is %T, want string", r["name"])
	}
	return name, nil
}
