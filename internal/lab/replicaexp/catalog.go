package replicaexp

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/refdata"
)

// catalogAndCeiling measures the catalog at 100 connections in rounds
// with a hello world that writes what it writes (its ceiling), the
// catalog at the other connection counts and its listing, its freshness
// under writes, and the Postgres-backed catalog.
func (b *bench) catalogAndCeiling(ctx context.Context) error {
	cat, err := b.service(ctx, "catalog", refdata.FromReplica)
	if err != nil {
		return err
	}
	defer cat.Stop()
	answer, err := sameAnswer(ctx, cat)
	if err != nil {
		return err
	}
	hello, err := b.run.StartService(ctx, "hello", serviceCPU, serviceMemMB, answer.Args()...)
	if err != nil {
		return err
	}
	defer hello.Stop()
	// What Go made of the quota (it rounds a limit below 2 up to 2).
	if m, err := lab.Scrape(ctx, hello.URL("/metrics")); err == nil {
		b.run.SetEnv("services", fmt.Sprintf("%.0f CPU, %d MB each; GOMAXPROCS %.0f (Go's default under the quota)",
			serviceCPU, serviceMemMB, m["go_sched_gomaxprocs_threads"]))
	}
	at100, err := b.ceiling(ctx, hello, cat, answer)
	if err != nil {
		return err
	}
	if err := b.catalogRows(ctx, cat, at100); err != nil {
		return err
	}
	if err := b.freshness(ctx, cat); err != nil {
		return err
	}
	cat.Stop()
	return b.catalogFromPostgres(ctx)
}

// catalogRows measures the catalog from the replica at the report's other
// connection counts (warm already), adds every count's row, their mean
// beside the report's, and the listing.
func (b *bench) catalogRows(ctx context.Context, cat *lab.Service, at100 *labresult.Row) error {
	byConns := map[int]*labresult.Row{compareConns: at100}
	for _, conns := range catalogConns {
		if conns == compareConns {
			continue
		}
		row, err := b.single(ctx, setup{key: catalogKey(conns), svc: cat, path: catalogPath, conns: conns}, b.t.run, false)
		if err != nil {
			return err
		}
		byConns[conns] = row
	}
	memory := b.replicaMemory(ctx, cat)
	for _, conns := range catalogConns {
		row := byConns[conns]
		memory(row)
		row.Set(queriesPerRequest, 0)
		row.AddNote("0 DB queries per request; report (k6, %d VUs): %.0f req/s", conns, *row.Ref.RPS)
		if conns == compareConns {
			row.AddNote("measured in rounds with the hello world; %s", coresText(row))
		}
		b.run.AddRow(row)
	}
	b.run.AddRow(averageRow(byConns))
	if err := b.production(ctx, cat); err != nil {
		return err
	}
	// The listing the ordered index serves (a map alone could not).
	list, err := b.single(ctx, setup{key: catalogListKey, svc: cat, path: listPath, conns: compareConns}, b.t.run, true)
	if err != nil {
		return err
	}
	memory(list)
	list.Set(queriesPerRequest, 0)
	list.AddNote("GET %s: the region's first 20 customers by name, from the replica's ordered index; 0 DB queries per request", listPath)
	b.run.AddRow(list)
	return nil
}

// replicaMemory reads what the catalog's replica holds, as it estimates
// it, and returns what sets it on a row: once, since the rows read the
// same loaded tables. A scrape that fails leaves the figures out (null).
func (b *bench) replicaMemory(ctx context.Context, cat *lab.Service) func(*labresult.Row) {
	m, err := lab.ScrapeMetrics(ctx, cat.URL("/metrics"))
	if err != nil {
		return func(row *labresult.Row) { row.AddNote("replica memory not read: %v", err) }
	}
	perRow := m.Sum("replica_table_bytes_per_row", map[string]string{"table": refdata.TableCustomers})
	total := m.Sum("replica_table_bytes", nil)
	return func(row *labresult.Row) {
		row.Set(bytesPerRow, perRow)
		row.Set(replicaMB, total/(1<<20))
	}
}

// production measures the catalog at the report's production load, where
// its 120 µs mean and near-zero CPU were seen: 2,500 requests a minute in
// the open model. The service is warm from the rows before; a warm-up
// would also stretch the run to the lab's floor of 2,000 requests, some
// 50 s at this rate.
func (b *bench) production(ctx context.Context, cat *lab.Service) error {
	rate := productionPerMin / 60.0
	row, err := b.single(ctx, setup{key: catalogProdKey, svc: cat, path: catalogPath, conns: compareConns, rate: rate}, b.t.prod, false)
	if err != nil {
		return err
	}
	row.Set(queriesPerRequest, 0)
	row.AddNote("open model at %.1f requests/s (%d a minute, within the report's production peak of 2-3k a minute), at most %d in flight; report: 120 µs mean per response with near-zero CPU, in production (where it was timed the report does not say; ours is timed by the load generator from each request's intended send, loopback included); the service used %.3f cores of its %.0f",
		rate, productionPerMin, compareConns, row.Value(labresult.CPUAvg), serviceCPU)
	b.run.AddRow(row)
	return nil
}

// catalogFromPostgres measures the catalog reading Postgres on every
// request, with its DB queries per request.
func (b *bench) catalogFromPostgres(ctx context.Context) error {
	svc, err := b.service(ctx, "catalog", refdata.FromPostgres)
	if err != nil {
		return err
	}
	defer svc.Stop()
	row, err := b.single(ctx, setup{key: catalogPGKey, svc: svc, path: catalogPath, conns: compareConns,
		counters: []lab.Counter{{Metric: dbQueries, URL: svc.URL("/metrics"), Name: "db_queries_total"}}}, b.t.run, true)
	if err != nil {
		return err
	}
	if row.Requests > 0 {
		row.Set(queriesPerRequest, row.Value(dbQueries)/float64(row.Requests))
	}
	row.AddNote("%.2f DB queries per request; %s", row.Value(queriesPerRequest), coresText(row))
	b.run.AddRow(row)
	return nil
}

// averageRow is the report's 35,540 req/s beside ours, averaged the same
// way: the mean of the catalog rows from 4 connections up (the report's
// from 4 VUs up), each row weighted alike.
func averageRow(byConns map[int]*labresult.Row) *labresult.Row {
	row := lab.NewRow(catalogAvgKey)
	row.Model = "closed"
	var sum float64
	var used []string
	for _, conns := range catalogConns {
		if r := byConns[conns]; conns >= reportAvgFrom && r != nil && r.RPS != nil {
			sum += *r.RPS
			used = append(used, strconv.Itoa(conns))
			row.Runs++
		}
	}
	if row.Runs == 0 {
		row.AddNote("not measured: no catalog row from 4 connections up")
		return row
	}
	row.RPS = labresult.F(sum / float64(row.Runs))
	row.AddNote("mean req/s of our rows at %s connections, as the report averaged its k6 rows from 4 VUs up (35,540 req/s, of %s). What differs: the report ran k6 (JavaScript VUs) on an iMac M1 with the app under cpulimit 100%%; we run hlab load (Go, closed model, a connection per VU) on this machine, outside the service's %.0f-CPU cgroup quota, sharing its cores with the service",
		strings.Join(used, ", "), "33,954, 34,378, 36,411, 37,089, 35,870", serviceCPU)
	return row
}
