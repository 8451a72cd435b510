// Package replicaexp is report B's experiment ("how many CPU cores for
// 30k+ rps?"): reference data served from an in-memory replica kept fresh
// by change data capture (package replica, Postgres logical replication,
// and MongoDB change streams through a stand-in), against the same data
// read from Postgres on every request.
//
// Every service runs under a 1-CPU quota (the report's cpulimit 100%);
// Postgres runs under its own 1-CPU quota, durable (fsync and synchronous
// commit on); the load generator runs outside both. Rows:
//
//   - pricing (hlab serve pricing), closed model: all eight entities from
//     Postgres (eight queries per request, the report's "before") against
//     seven reference tables from the replica and the product from
//     Postgres (one query, the "after"), with DB queries per request read
//     from the service's own db_queries_total;
//   - catalog (hlab serve catalog, GET /customers/{id}) from the replica
//     at the report's k6 VU counts (1-200 connections), beside the report's
//     table, and from Postgres at 100 connections for comparison;
//   - a Go hello world (hlab serve hello) under the same quota, measured in
//     the same run, answering what the catalog answers (a JSON body of the
//     same size, the same headers: hello --body-bytes, --header): the
//     ceiling of a Go HTTP service writing that answer on that quota;
//   - freshness: 1,000 single-row update transactions per second, and the
//     delay from each transaction's commit (Postgres's commit timestamp) to
//     the row being visible, in a replica in the lab process (exact, per
//     change) and in the catalog service's replica (its
//     replica_lag_seconds histogram); then a row that does not decode,
//     which both replicas must report and skip;
//   - the report's own source, MongoDB Watch, through a stand-in
//     (mongo-java-server under its own 1-CPU quota; no mongod installs
//     here, and every label says "stand-in, not mongod" and what it lacks):
//     the catalog from a replica the stand-in's change streams feed, at 100
//     connections, and its freshness with no other writes and under the
//     same 1,000 writes/s, timed from a write's send to the service
//     answering with it;
//   - the report's micro-benchmark (internal/userrepo's loop, run through
//     testing.Benchmark in the lab process): a user's Get via the stand-in,
//     via Redis (a real redis-server) and from the in-memory replica the
//     stand-in feeds, with ns/op, allocs/op and the ratios beside the
//     report's "about four orders of magnitude";
//   - the report's 35,540 req/s (its k6 rows from 4 VUs up, averaged)
//     beside the mean of our catalog rows from 4 connections up;
//   - the catalog at the report's production load, 2,500 requests a
//     minute in the open model (its peak was 2-3k a minute), beside the
//     report's 120 µs mean and near-zero CPU, which production saw there:
//     not beside the saturated rows, whose load the report's mean was not
//     measured under.
//
// Rows that a claim or a target compares (hello and the catalog at 100
// connections; pricing before and after) are measured in rounds, their
// order alternating (lab.MeasurePaired), so that load from elsewhere on a
// shared machine falls on both alike. DB queries per request are a
// target, not a claim: eight against one holds by construction.
package replicaexp

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/catalog"
	"github.com/highload-lab/hlab/internal/services/pricing"
	"github.com/highload-lab/hlab/internal/services/refdata"
)

// The setup.
const (
	serviceCPU   = 1.0 // the report's cpulimit 100%
	serviceMemMB = 1024
	postgresCPU  = 1.0 // Postgres's own quota, like a database container beside the app
	pricingConns = 64
	compareConns = 100 // the catalog's row against hello and Postgres
	dbName       = "hlab"
	// The requests: one product in one city, one customer. Fixed URLs
	// (the load generator sends one URL); every row is cached in Postgres's
	// buffers anyway, so varying them would change little.
	pricingPath = "/price?product=4242&city=17"
	catalogPath = "/customers/4242"
	listPath    = "/customers?region=Moscow&limit=20"
	writeRate   = 1000 // freshness: update transactions per second
)

// Experiment is report B's replica experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

// name is the experiment's name, and its directory under the lab's work
// directory (where lab.StartService writes service logs).
const name = "replica"

// timing is how long each part runs in a mode.
type timing struct {
	run       time.Duration // a measured run
	fresh     time.Duration // freshness: measured write load
	freshWarm time.Duration
	quiet     time.Duration // freshness from the MongoDB stand-in with no write load
	prod      time.Duration // the catalog at the report's production load
}

func timings(o lab.Options) timing {
	if o.Mode == lab.Full {
		// The report's k6 ran 100 s per VU count.
		return timing{run: 100 * time.Second, fresh: 30 * time.Second, freshWarm: 2 * time.Second, quiet: 10 * time.Second, prod: time.Minute}
	}
	// The production row: 15 s at 2,500 a minute is some 600 requests,
	// enough for a mean (its figure), not for a fine tail.
	return timing{run: 5 * time.Second, fresh: 5 * time.Second, freshWarm: time.Second, quiet: 2 * time.Second, prod: 15 * time.Second}
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	t := timings(o)
	paired := 2*(ceilingRounds+4)*(t.run+300*time.Millisecond) + 9*time.Second         // hello/catalog's rounds and steady warm-up, pricing's (about four)
	singles := time.Duration(len(catalogConns)+2) * time.Duration(o.Repeats()) * t.run // + the stand-in's catalog row
	fresh := 2 * (t.freshWarm + t.fresh)                                               // from Postgres, from the stand-in
	micro := time.Duration(3*o.Repeats()) * 1500 * time.Millisecond                    // testing.Benchmark: ~1.5 s per store and run
	pgbench := t.run + 15*time.Second                                                  // its -T, with pgbench -i and the replica's load and catch-up
	prod := time.Duration(o.Repeats()) * t.prod
	restart := 10 * time.Second // seed, two loads and the compares
	if o.Mode == lab.Full {
		restart = 40 * time.Second
	}
	startAtOnce := time.Duration(len(startVariants))*startWindow(o) + 5*time.Second                   // + the table's fill and a service's start
	return paired + singles + fresh + micro + pgbench + prod + startAtOnce + restart + 35*time.Second // Postgres, the stand-in, Redis, seeds, service starts
}

// bench is what the experiment's phases share.
type bench struct {
	run  *lab.Run
	t    timing
	pg   *deps.Postgres
	dsn  string
	slot int
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	b := &bench{run: run, t: timings(run.Opts)}
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("services", fmt.Sprintf("%.0f CPU, %d MB each", serviceCPU, serviceMemMB))
	run.SetEnv("load", "hlab load, closed model (k6 VUs / wrk connections), outside the quotas")
	err := b.startPostgres(ctx)
	if b.pg != nil {
		defer b.pg.Stop()
	}
	if err != nil {
		return err
	}
	for _, phase := range []func(context.Context) error{b.catalogAndCeiling, b.pricing, b.faults, b.pgbench, b.startAtOnce, b.mongo, b.restart} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	if run.Opts.Mode != lab.Full {
		full := lab.Options{Mode: lab.Full}
		ft := timings(full)
		run.Note("quick mode: runs of %v (full: %v), catalog rows other than %d connections one run each (full: %d), freshness %v of writes (full: %v), micro-benchmark one run per store (full: %d)",
			b.t.run, ft.run, compareConns, full.Repeats(), b.t.fresh, ft.fresh, full.Repeats())
	}
	return nil
}

// startPostgres starts Postgres (or connects to the external one), under
// its own quota and durable, and loads the seed. b.pg is set once
// there is a server to stop, even when a later step fails.
func (b *bench) startPostgres(ctx context.Context) error {
	run := b.run
	run.Progress.Step("start Postgres and load the seed", 5*time.Second)
	pg, err := run.Postgres(ctx, deps.PostgresConfig{Durable: true, CPU: postgresCPU})
	if err != nil {
		return err
	}
	b.pg = pg
	if pg.External() {
		if err := pg.RequireLogical(); err != nil {
			return err
		}
		// The fault rows it does not rerun are not in the Spec (faultsRun).
		run.Note("Postgres is an external server: its CPU is not measured (the rows' postgres_cpu is 0), and the fault rows that restart it or change its settings are not rerun (%s)", lab.ExternalReason)
	}
	run.SetEnv("postgres", fmt.Sprintf("%s, own quota %.0f CPU", pg.Kind, postgresCPU))
	run.SetEnv("postgres_settings", pg.SettingsLine())
	if err := pg.CreateDatabase(ctx, dbName, deps.Replication); err != nil {
		return err
	}
	b.dsn = pg.ServiceDSN(dbName)
	if err := seed(ctx, b.dsn); err != nil {
		return err
	}
	run.UsedInFirstClaim(itemPricingData, dataText())
	run.SetEnv("data", fmt.Sprintf("%d products, %d customers; reference tables: %d brands, %d categories, %d cities, %d zones, %d warehouses, %d customer groups, %d price rules",
		refdata.DefaultProducts, refdata.DefaultCustomers, refdata.NumBrands, refdata.NumCategories, refdata.NumCities,
		refdata.NumZones, refdata.NumWarehouses, refdata.NumGroups, refdata.NumRules))
	run.SetEnv("requests", fmt.Sprintf("pricing GET %s, %d connections; catalog GET %s", pricingPath, pricingConns, catalogPath))
	return nil
}

func seed(ctx context.Context, dsn string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := refdata.Init(ctx, pool, refdata.Size{}); err != nil {
		return err
	}
	// Fresh statistics, so the planner uses the primary keys from the start.
	_, err = pool.Exec(ctx, "ANALYZE")
	return err
}

// slotName is the replication slot of the last service b started of
// name: unique to the run on an external server, where slots are the
// server's, shared by every database.
func (b *bench) slotName(name string) string {
	return b.pg.Unique(fmt.Sprintf("lab_%s_%d", name, b.slot))
}

// service starts name, "catalog" or "pricing", at 1 CPU reading from
// source, with its own replication slot.
func (b *bench) service(ctx context.Context, name string, source refdata.Source) (*lab.Service, error) {
	b.slot++
	c := refdata.Config{Source: source, DB: refdata.DB{DSN: b.dsn, Slot: b.slotName(name)}}
	var cmd cliflag.Command
	switch name {
	case "catalog":
		cmd = catalog.Config(c).Command()
	case "pricing":
		cmd = pricing.Config(c).Command()
	default:
		return nil, fmt.Errorf("replica: no service %q", name)
	}
	return b.run.StartCommand(ctx, name, serviceCPU, serviceMemMB, cmd)
}

// pricing measures the service before (Postgres) and after (replica), in
// rounds: the claim's pairs. Its DB queries per request are a target.
func (b *bench) pricing(ctx context.Context) error {
	var setups []setup
	for _, s := range []struct {
		key    labresult.Key
		source refdata.Source
	}{{pricingBeforeKey, refdata.FromPostgres}, {pricingAfterKey, refdata.FromReplica}} {
		svc, err := b.service(ctx, "pricing", s.source)
		if err != nil {
			return err
		}
		defer svc.Stop()
		if s.source == refdata.FromPostgres {
			b.run.UsedInFirstClaim(itemPricingDB, pricingDBText(b.pg.External(), s.source))
		} else {
			b.run.UsedInFirstClaim(itemFeed, feedText(s.source))
		}
		metrics := svc.URL("/metrics")
		setups = append(setups, setup{key: s.key, svc: svc, path: pricingPath, conns: pricingConns,
			counters: []lab.Counter{
				{Metric: dbQueries, URL: metrics, Name: "db_queries_total"},
				{Metric: pricingRequests, URL: metrics, Name: "pricing_requests_total"},
			}})
	}
	b.run.UsedInFirstClaim(itemPricingQuota, quotaText(serviceCPU, serviceMemMB, postgresCPU))
	b.run.UsedInFirstClaim(itemPricingLoad, loadText(setups[0].conns, b.t.run))
	rows, err := b.paired(ctx, 0, setups)
	if err != nil {
		return err
	}
	for _, row := range rows {
		if r := row.Value(pricingRequests); r > 0 {
			row.Set(queriesPerRequest, row.Value(dbQueries)/r)
		}
		if row.RPS != nil && *row.RPS > 0 && row.CPUAvg != nil {
			row.Set(postgresCPUPerRequest, row.Value(postgresCores) / *row.RPS * 1e6)
			row.Set(serviceCPUPerRequest, *row.CPUAvg / *row.RPS * 1e6)
		}
		row.AddNote("%d connections, in rounds with the other pricing row; %.2f DB queries per request (db_queries_total / pricing_requests_total over the measured runs); CPU per request: service %.0f µs, Postgres %.0f µs; %s; report: %s",
			pricingConns, row.Value(queriesPerRequest), row.Value(serviceCPUPerRequest), row.Value(postgresCPUPerRequest),
			coresText(row), refText(row.Ref))
		b.run.AddRow(row)
	}
	return nil
}

// coresText tells where a row's CPU went: whether the service had its
// quota, and whether the machine had any to spare.
func coresText(r *labresult.Row) string {
	return fmt.Sprintf("cores used: service %.2f of %.0f, Postgres %.2f of %.0f, load generator %.2f, whole machine %.2f of %d",
		r.Value(labresult.CPUAvg), serviceCPU, r.Value(postgresCores), postgresCPU, r.Value(loadgenCores), r.Value(machineCores), runtime.NumCPU())
}

// refText gives the report's figures declared for a pricing row.
func refText(r *labresult.Ref) string {
	if r == nil || r.RPS == nil || r.MeanMS == nil {
		return "none"
	}
	return fmt.Sprintf("%.0f rps, mean %.0f ms", *r.RPS, *r.MeanMS)
}
