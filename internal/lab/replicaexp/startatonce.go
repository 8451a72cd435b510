package replicaexp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/replica"
)

// Many replicas starting at once (ours, not the report's: it only warns
// that they strain the database): startInstances replicas of one table
// start together, with their snapshot loads limited to the library's
// default number at once, and with no limit, while a pricing service that
// was already serving (it reads each request's product from Postgres)
// takes a steady load. The replicas run in the lab process: eight
// processes at a 1-CPU quota each would ask four times the machine's two
// cores, and what the row is about, the database's side, is the same
// whichever process a replica lives in.
const (
	startInstances = 8
	startTable     = "start_items"
	startPub       = "lab_start"
	// The serving instance's load: open model, well under its capacity,
	// so that a slow request is the database's doing, not a queue's;
	// 2,400 requests in a quick run's 8 s, above the lab's floor of 2,000 for a tail.
	startServeRate  = 300
	startServeConns = 16
	// startDelay is how long the serving instance's load runs before the
	// replicas start.
	startDelay = time.Second
)

// Row keys and labels of the two variants.
const (
	startLimitKey     labresult.Key = "start-at-once/postgres/limit-2"
	startNoLimitKey   labresult.Key = "start-at-once/postgres/no-limit"
	startLimitLabel                 = "ours: 8 replicas start at once, at most 2 snapshot loads at a time (the default)"
	startNoLimitLabel               = "ours: 8 replicas start at once, snapshot loads not limited"
)

// startVariant is one way of starting the replicas.
type startVariant struct {
	key   labresult.Key
	limit int    // replica.PostgresSnapshotLimit; -1: none
	log   string // the replicas' log, in the experiment's directory
}

var startVariants = []startVariant{
	{startLimitKey, refdata.DefaultSnapshotLimit, "start-limit-2-replicas.log"},
	{startNoLimitKey, -1, "start-no-limit-replicas.log"},
}

// startRows is the table's size: a load of about a second at full size.
func startRows(o lab.Options) int {
	switch {
	case o.Short:
		return 5_000
	case o.Mode == lab.Full:
		return 1_000_000
	}
	return 200_000
}

// startWindow is how long the serving instance's load runs per variant:
// the replicas start startDelay into it.
func startWindow(o lab.Options) time.Duration {
	if o.Mode == lab.Full {
		return 30 * time.Second
	}
	return 8 * time.Second
}

// startDelay is startDelay, but not in the lab's wiring tests (Short),
// whose load lasts a fifth of a second.
func (b *bench) startDelay() time.Duration {
	if b.run.Opts.Short {
		return 0
	}
	return startDelay
}

type startItem struct {
	ID      int32
	Name    string
	Payload string
}

// startAtOnce measures both variants against one pricing service.
func (b *bench) startAtOnce(ctx context.Context) error {
	n := startRows(b.run.Opts)
	b.run.Progress.Step(fmt.Sprintf("start at once: a table of %d rows", n), 5*time.Second)
	pool, err := pgxpool.New(ctx, b.dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS `+startTable+`;
		CREATE TABLE `+startTable+` (id int PRIMARY KEY, name text NOT NULL, payload text NOT NULL);
		DROP PUBLICATION IF EXISTS `+startPub+`;
		CREATE PUBLICATION `+startPub+` FOR TABLE `+startTable); err != nil {
		return fmt.Errorf("start at once: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+startTable+` SELECT g, 'item ' || g, repeat(md5(g::text), 3) FROM generate_series(1, $1) g`, n); err != nil {
		return fmt.Errorf("start at once: fill %s: %w", startTable, err)
	}
	svc, err := b.service(ctx, "pricing", refdata.FromReplica)
	if err != nil {
		return err
	}
	defer svc.Stop()
	for _, v := range startVariants {
		row, err := b.startVariant(ctx, svc, pool, v)
		if err != nil {
			return err
		}
		row.AddNote("%d replicas of a %d-row table (in the lab process) started together, %v into a steady load of %d req/s (%d connections, open model) on a pricing service that was already serving (7 tables from its replica, the product from Postgres); "+
			"ready: median %.2f s, last %.2f s; Postgres (%.0f-CPU quota) peak %.2f cores in a 100 ms sample; peak %0.f connections to the database (pg_stat_activity every 50 ms: the replicas' and the service's); the serving instance's slowest request %.1f ms",
			startInstances, n, startDelay, startServeRate, startServeConns, row.Value(readyMedianS), row.Value(readyMaxS), postgresCPU, row.Value(postgresCPUPeak), row.Value(pgConnsPeak), row.Value(labresult.MaxMS))
		if last := time.Duration(row.Value(readyMaxS) * float64(time.Second)); !b.run.Opts.Short && startDelay+last > startWindow(b.run.Opts) {
			row.AddNote("the last replica was ready after the serving instance's load had ended: its slowest request misses the end of the start")
		}
		b.run.AddRow(row)
	}
	return nil
}

// startVariant starts the replicas once, the serving instance under its
// load meanwhile, and returns the row.
func (b *bench) startVariant(ctx context.Context, svc *lab.Service, pool *pgxpool.Pool, v startVariant) (*labresult.Row, error) {
	b.run.Progress.Step(b.run.Label(v.key), startWindow(b.run.Opts))
	m := b.measurement(setup{key: v.key, svc: svc, path: pricingPath, conns: startServeConns, rate: startServeRate}, startWindow(b.run.Opts))
	m.NoWarmup, m.Repeat = true, 1
	var (
		row     *labresult.Row
		loadErr error
		loaded  = make(chan struct{})
	)
	go func() { row, loadErr = b.run.Measure(ctx, m); close(loaded) }()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(b.startDelay()):
	}
	sctx, stopSampling := context.WithCancel(ctx)
	conns := make(chan float64, 1)
	go func() { conns <- peakConnections(sctx, pool) }()
	meter := b.pg.Proc().Measure()
	ready, err := b.startReplicas(ctx, v)
	pg := meter.Stop()
	stopSampling()
	peak := <-conns
	<-loaded
	if err == nil {
		err = loadErr
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(ready)
	row.Set(readyMedianS, ready[len(ready)/2].Seconds())
	row.Set(readyMaxS, ready[len(ready)-1].Seconds())
	row.Set(postgresCPUPeak, pg.CPUMax)
	row.Set(pgConnsPeak, peak)
	return row, nil
}

// startReplicas starts the variant's replicas together, waits until each
// is ready, and returns how long each took. It stops them before it
// returns (each drops its slot).
func (b *bench) startReplicas(ctx context.Context, v startVariant) ([]time.Duration, error) {
	logf, err := os.Create(filepath.Join(b.run.Opts.WorkDir, name, v.log))
	if err != nil {
		return nil, fmt.Errorf("start at once: replica log: %w", err)
	}
	defer logf.Close()
	logger := slog.New(slog.NewTextHandler(logf, nil))
	rctx, stop := context.WithCancel(ctx)
	var runs sync.WaitGroup
	defer func() { stop(); runs.Wait() }()
	ready := make([]time.Duration, startInstances)
	errs := make([]error, startInstances)
	var waits sync.WaitGroup
	began := time.Now()
	for i := range startInstances {
		tb := replica.NewTable[int32, startItem](startTable)
		src, err := replica.NewPostgresSource(b.dsn, []replica.Binding{replica.Bind(tb, startItemKey, decodeStartItem)},
			replica.PostgresSlot(b.pg.Unique(fmt.Sprintf("lab_start_%d", i))), replica.PostgresPublication(startPub),
			replica.PostgresSnapshotLimit(v.limit), replica.PostgresLogger(logger.With("replica", i)))
		if err != nil {
			return nil, err
		}
		runs.Go(func() { src.Run(rctx) })
		waits.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			if err := tb.WaitReady(wctx); err != nil {
				errs[i] = fmt.Errorf("start at once: replica %d not ready: %w (%v)", i, err, tb.Err())
			}
			ready[i] = time.Since(began)
		})
	}
	waits.Wait()
	return ready, errors.Join(errs...)
}

func startItemKey(r replica.Row) (int32, error) { return int32Col(r, "id") }

func decodeStartItem(r replica.Row) (startItem, error) {
	id, err := int32Col(r, "id")
	name, ok1 := r["name"].(string)
	payload, ok2 := r["payload"].(string)
	if err == nil && !(ok1 && ok2) {
		err = fmt.Errorf("name is %T and payload %T, want strings", r["name"], r["payload"])
	}
	return startItem{ID: id, Name: name, Payload: payload}, err
}

// peakConnections samples the database's connections every 50 ms until
// ctx ends and returns the most it saw.
func peakConnections(ctx context.Context, pool *pgxpool.Pool) float64 {
	var peak int64
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		var n int64
		// A sample that fails (the pool busy past a second) is one fewer.
		if pool.QueryRow(qctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&n) == nil {
			peak = max(peak, n)
		}
		cancel()
		select {
		case <-ctx.Done():
			return float64(peak)
		case <-tick.C:
		}
	}
}
