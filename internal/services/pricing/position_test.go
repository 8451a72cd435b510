package pricing_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/services/pricing"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/replica"
)

// TestReadYourWrites: a client changes a reference row in Postgres,
// reads the write position after its commit and asks for a price with
// it in X-Min-Position, a thousand times: every answer has its write.
func TestReadYourWrites(t *testing.T) {
	dsn, pool := refdatatest.DB(t, refdatatest.Small)
	v := start(t, dsn, refdata.FromReplica, "ryw")
	ctx := context.Background()
	const pairs = 1000
	for i := range pairs {
		handling := int64(500_000 + i)
		// Committed with synchronous_commit on, PostgreSQL's default (the
		// tests' server runs with it off): the server streams a change
		// once its WAL is flushed.
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE warehouses SET handling_cents = $1
				WHERE id = (SELECT warehouse_id FROM zones WHERE id = (SELECT zone_id FROM cities WHERE id = 1))`, handling)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		pos, err := replica.PostgresWritePosition(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		code, body := v.getWith(t, "/price?product=1&city=1", refdata.MinPositionHeader, pos.String())
		if code != 200 {
			t.Fatalf("pair %d: %d %s", i, code, body)
		}
		var q pricing.Quote
		if err := json.Unmarshal([]byte(body), &q); err != nil {
			t.Fatal(err)
		}
		if q.Handling != handling {
			t.Fatalf("pair %d: the price read with %s %s has handling %d, not the %d just written", i, refdata.MinPositionHeader, pos, q.Handling, handling)
		}
	}
}

// TestMinPositionErrors: a malformed position is a 400 that says what to
// send; one the replica does not reach within --position-wait, a 504
// that says where it is.
func TestMinPositionErrors(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	reg := prometheus.NewRegistry()
	s, err := pricing.New(context.Background(), pricing.Config{Source: refdata.FromReplica,
		DB: refdata.DB{DSN: dsn, Slot: "ryw_errors", Publication: "ryw_errors"}, Registry: reg, PositionWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	refdatatest.Run(t, s)
	v := svc{s, s.Handler(), reg}
	for _, tt := range []struct {
		position string
		code     int
		why      string
	}{
		{"16B3748", 400, "must be a WAL position such as 0/16B3748"},
		{"0/zz", 400, "pg_current_wal_insert_lsn()"},
		{"FFFF/0", 504, "did not reach X-Min-Position FFFF/0 within 300ms"},
		{"0/1", 200, `"price":`},
	} {
		code, body := v.getWith(t, "/price?product=1&city=1", refdata.MinPositionHeader, tt.position)
		if code != tt.code || !strings.Contains(body, tt.why) {
			t.Errorf("%s %s: %d %q, want %d with %q", refdata.MinPositionHeader, tt.position, code, body, tt.code, tt.why)
		}
	}
}
