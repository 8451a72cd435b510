package replicaexp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/refdata"
)

// What production does to a replica, as lab rows: each fault hits the
// catalog service (its replica of the customers table, fed by logical
// replication) while writes go on; the row says how long after the fault
// the replica served a write made once the writes stopped (converge_s)
// and how many customers it then still served differently from the
// database (rows_differing, which must be 0).
const (
	faultWriteRate = 200              // customer updates per second during a fault
	convergeLimit  = 90 * time.Second // longest wait for a replica to converge
	walKeepLimit   = "16MB"           // max_slot_wal_keep_size while the slot falls behind
)

// The fault rows.
const (
	faultConnKilled labresult.Key = "fault/connection-killed"
	faultPGRestart  labresult.Key = "fault/postgres-restart"
	faultSlotLost   labresult.Key = "fault/slot-lost"

	faultConnKilledLabel = "fault: replication connection killed (pg_terminate_backend)"
	faultPGRestartLabel  = "fault: Postgres restarted (fast shutdown)"
	faultSlotLostLabel   = "fault: slot invalidated by WAL limits (catalog SIGKILLed, WAL written past max_slot_wal_keep_size)"
)

// fault is a fault row: onExternal says whether it runs on an external
// Postgres, which the lab must not restart nor reconfigure
// (lab.ExternalReason; figures says so).
type fault struct {
	key        labresult.Key
	label      string
	onExternal bool
}

var allFaults = []fault{
	{faultConnKilled, faultConnKilledLabel, true},
	{faultPGRestart, faultPGRestartLabel, false},
	{faultSlotLost, faultSlotLostLabel, false},
}

// faultsRun are the fault rows a run with o measures.
func faultsRun(o lab.Options) []fault {
	external := o.ExternalFor(lab.DepPostgres)
	var out []fault
	for _, f := range allFaults {
		if f.onExternal || !external {
			out = append(out, f)
		}
	}
	return out
}

// faults runs the fault rows on a catalog service of their own.
func (b *bench) faults(ctx context.Context) error {
	cat, err := b.service(ctx, "catalog", refdata.FromReplica)
	if err != nil {
		return err
	}
	slot := b.slotName("catalog") // the one b.service gave it
	defer func() { cat.Stop() }()
	pcfg, err := pgxpool.ParseConfig(b.pg.DSN(dbName)) // the superuser: ALTER SYSTEM, ending backends
	if err != nil {
		return err
	}
	pcfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := awaitServed(ctx, cat, pool, convergeLimit); err != nil {
		return fmt.Errorf("faults: the catalog did not load: %w", err)
	}
	inject := map[labresult.Key]func(ctx context.Context) error{
		faultConnKilled: func(ctx context.Context) error { return killWalSender(ctx, pool, slot) },
		faultPGRestart: func(ctx context.Context) error {
			if err := b.pg.StopServer(); err != nil {
				return err
			}
			pool.Reset() // its connections went with the server
			return b.pg.StartServer(ctx)
		},
		faultSlotLost: func(ctx context.Context) error { return loseSlot(ctx, pool, cat, slot) },
	}
	for _, f := range faultsRun(b.run.Opts) {
		b.run.Progress.Step(f.label, 10*time.Second)
		row, err := b.fault(ctx, cat, pool, f.key, inject[f.key])
		if err != nil {
			return fmt.Errorf("%s: %w", f.label, err)
		}
		b.run.AddRow(row)
	}
	return nil
}

// fault runs writes at faultWriteRate for a second, injects the fault,
// writes for another second, then writes a fence and waits for the
// catalog to serve it; then it compares every customer.
func (b *bench) fault(ctx context.Context, cat *lab.Service, pool *pgxpool.Pool, key labresult.Key, inject func(context.Context) error) (*labresult.Row, error) {
	wctx, stopWrites := context.WithCancel(ctx)
	var written, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second / faultWriteRate)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			c, cancel := context.WithTimeout(wctx, writeTimeout)
			_, err := pool.Exec(c, `UPDATE customers SET credit_limit_cents = credit_limit_cents + 1, updated_at = now() WHERE id = $1`, i%refdata.DefaultCustomers+1)
			cancel()
			if err != nil {
				failed.Add(1)
			} else {
				written.Add(1)
			}
		}
	})
	time.Sleep(time.Second)
	start := time.Now()
	err := inject(ctx)
	time.Sleep(time.Second)
	stopWrites()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if err := awaitServed(ctx, cat, pool, convergeLimit); err != nil {
		return nil, err
	}
	converge := time.Since(start).Seconds()
	differing, err := compareCustomers(ctx, cat, pool)
	if err != nil {
		return nil, err
	}
	row := lab.NewRow(key)
	row.Model, row.Runs, row.RowsDiffering, row.ConvergeS = "fault", 1, &differing, &converge
	row.Set(faultWrites, float64(written.Load()))
	row.Set(faultWritesFailed, float64(failed.Load()))
	row.AddNote("%d updates at %d/s around the fault (%d failed while Postgres was away); the catalog served a write made after them %.1f s after the fault; %d of %d customers differ from the database",
		written.Load(), faultWriteRate, failed.Load(), converge, differing, refdata.DefaultCustomers)
	return row, nil
}

// killWalSender terminates the walsender of slot: the replica's
// replication connection drops, as a network cut or a failover does.
func killWalSender(ctx context.Context, pool *pgxpool.Pool, slot string) error {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots
		WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot).Scan(&n)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no active replication connection to kill")
	}
	return nil
}

// loseSlot kills the catalog outright (its slot stays behind), writes
// WAL past max_slot_wal_keep_size until Postgres invalidates the slot
// (wal_status lost), and starts the catalog again on the same slot.
func loseSlot(ctx context.Context, pool *pgxpool.Pool, cat *lab.Service, slot string) error {
	if err := cat.Kill(); err != nil {
		return err
	}
	// ALTER SYSTEM runs outside any transaction: one statement per call.
	for _, q := range []string{`ALTER SYSTEM SET max_slot_wal_keep_size = '` + walKeepLimit + `'`, `SELECT pg_reload_conf()`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return err
		}
	}
	defer func() {
		ctx := context.WithoutCancel(ctx)
		pool.Exec(ctx, `ALTER SYSTEM RESET max_slot_wal_keep_size`)
		pool.Exec(ctx, `SELECT pg_reload_conf()`)
	}()
	lost := false
	for range 20 {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND wal_status = 'lost'`, slot).Scan(&n)
		if err != nil {
			return err
		}
		if n > 0 {
			lost = true
			break
		}
		// Every customer rewritten: WAL, and changes the catalog must get.
		if _, err := pool.Exec(ctx, `UPDATE customers SET credit_limit_cents = credit_limit_cents + 1, updated_at = now()`); err != nil {
			return err
		}
		for _, q := range []string{`SELECT pg_switch_wal()`, `CHECKPOINT`} {
			if _, err := pool.Exec(ctx, q); err != nil {
				return err
			}
		}
	}
	if !lost {
		return fmt.Errorf("the slot was not invalidated (max_slot_wal_keep_size %s)", walKeepLimit)
	}
	return cat.Restart(ctx)
}

// awaitServed writes a fence (one customer's credit set to a value of
// its own) and waits until the catalog serves it.
func awaitServed(ctx context.Context, cat *lab.Service, pool *pgxpool.Pool, limit time.Duration) error {
	fence := time.Now().UnixNano() % 1_000_000_000
	var err error
	for range 50 { // Postgres may still be coming back
		if _, err = pool.Exec(ctx, `UPDATE customers SET credit_limit_cents = $1 WHERE id = 1`, fence); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("writing the fence: %w", err)
	}
	return waitFor(ctx, limit, func() bool {
		c, err := getCustomer(ctx, cat, 1)
		return err == nil && c.CreditLimitCents == fence
	})
}

// catalogClient asks a catalog service for customers and its health.
var catalogClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

func getCustomer(ctx context.Context, cat *lab.Service, id int32) (refdata.Customer, error) {
	var c refdata.Customer
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cat.URL("/customers/"+strconv.Itoa(int(id))), nil)
	if err != nil {
		return c, err
	}
	resp, err := catalogClient.Do(req)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return c, fmt.Errorf("customer %d: status %d", id, resp.StatusCode)
	}
	return c, json.NewDecoder(resp.Body).Decode(&c)
}

// compareCustomers asks the catalog for every customer and counts those
// it serves differently from the database (or not at all).
func compareCustomers(ctx context.Context, cat *lab.Service, pool *pgxpool.Pool) (int64, error) {
	rows, err := pool.Query(ctx, `SELECT id, name, region, email, phone, credit_limit_cents, updated_at FROM customers ORDER BY id`)
	if err != nil {
		return 0, err
	}
	var want []refdata.Customer
	for rows.Next() {
		var c refdata.Customer
		if err := rows.Scan(&c.ID, &c.Name, &c.Region, &c.Email, &c.Phone, &c.CreditLimitCents, &c.UpdatedAt); err != nil {
			rows.Close()
			return 0, err
		}
		want = append(want, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var differing atomic.Int64
	jobs := make(chan refdata.Customer)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for w := range jobs {
				got, err := getCustomer(ctx, cat, w.ID)
				if err != nil || got.ID != w.ID || got.CreditLimitCents != w.CreditLimitCents || !got.UpdatedAt.Equal(w.UpdatedAt) ||
					got.Name != w.Name || got.Region != w.Region || got.Email != w.Email || got.Phone != w.Phone {
					differing.Add(1)
				}
			}
		})
	}
	for _, w := range want {
		jobs <- w
	}
	close(jobs)
	wg.Wait()
	return differing.Load(), nil
}
