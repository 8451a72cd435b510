package replica_test

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/highload-lab/hlab/replica"
)

// ExamplePostgresMaxStaleness serves from a replica only while it can
// vouch for its data: a handler asks Fresh once, then reads, and answers
// 503 with the age once the source has not confirmed the table current
// for 5 s (a broken stream, a replica that fell behind).
func ExamplePostgresMaxStaleness() {
	prices := replica.NewTable[int64, int64]("public.prices")
	src, err := replica.NewPostgresSource(os.Getenv("DATABASE_URL"), []replica.Binding{replica.Bind(prices,
		func(r replica.Row) (int64, error) { return r["id"].(int64), nil },
		func(r replica.Row) (int64, error) { return r["cents"].(int64), nil },
	)}, replica.PostgresSlot("pricing_1"), replica.PostgresMaxStaleness(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	_ = src // go src.Run(ctx)

	http.HandleFunc("GET /prices/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Replica-Age", strconv.FormatFloat(prices.Age().Seconds(), 'f', 3, 64))
		if err := prices.Fresh(); err != nil { // a *replica.StaleError: errors.Is(err, replica.ErrStale)
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable) // names the table and its age
			return
		}
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		cents, ok := prices.Get(id) // lock-free, no allocation
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, cents)
	})
}
