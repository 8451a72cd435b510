package nosqlexp

import (
	"fmt"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/activities"
)

// Row keys: the store, its setting, the connections.
const (
	pgSQL1     labresult.Key = "postgres/sql-defaults/c1"
	casP1      labresult.Key = "cassandra/periodic/c1"
	pgSQL12    labresult.Key = "postgres/sql-defaults/c12"
	casP12     labresult.Key = "cassandra/periodic/c12"
	pgSQLOur12 labresult.Key = "postgres/sql-defaults/our-table/c12"
	casPOur12  labresult.Key = "cassandra/periodic/our-table/c12"
	pg1        labresult.Key = "postgres/pgx-pool/c1"
	cas1       labresult.Key = "cassandra/durable/c1"
	pg12       labresult.Key = "postgres/pgx-pool/c12"
	cas12      labresult.Key = "cassandra/durable/c12"
	pgB1       labresult.Key = "postgres/batch/c1"
	casB1      labresult.Key = "cassandra/batch/c1"
	pgB12      labresult.Key = "postgres/batch/c12"
	casB12     labresult.Key = "cassandra/batch/c12"
)

// The services, each writing to a table of its own (a Postgres database
// or a Cassandra keyspace).
const (
	svcPGSQL    = "postgres --pg-pool sql-defaults --schema report"
	svcCasP     = "cassandra (commitlog periodic, authenticating) --schema report"
	svcPGSQLOur = "postgres --pg-pool sql-defaults"
	svcCasPOur  = "cassandra (commitlog periodic, authenticating)"
	svcPG       = "postgres"
	svcCas      = "cassandra (commitlog batch)"
	svcPGBatch  = "postgres --batch"
	svcCasB     = "cassandra --batch"
)

// Databases.
const (
	dbPG       = "postgres"
	dbCas      = "cassandra"
	dbCasPerio = "cassandra-periodic"
)

// The report's keyspace: its app's cluster.Keyspace.
const reportKeyspace = "app"

type serviceSpec struct {
	key string
	db  string
	// cfg is what the service changes from the defaults; the database it
	// reaches (Store, DSN or Cassandra, Keyspace, login) is filled in at
	// start.
	cfg   activities.Config
	table string // Postgres database or Cassandra keyspace
	// firstClaim: the first claim's rows load it, so what it runs with
	// is held to the Spec's setup (Run.UsedInFirstClaim).
	firstClaim bool
}

var serviceSpecs = []serviceSpec{
	{key: svcPGSQL, db: dbPG, cfg: activities.Config{PGPool: activities.PoolSQLDefaults, Schema: activities.SchemaReport}, table: "activities_report", firstClaim: true},
	{key: svcCasP, db: dbCasPerio, cfg: activities.Config{Schema: activities.SchemaReport}, table: reportKeyspace, firstClaim: true},
	{key: svcPGSQLOur, db: dbPG, cfg: activities.Config{PGPool: activities.PoolSQLDefaults}, table: "activities_sql_defaults"},
	{key: svcCasPOur, db: dbCasPerio, table: "hlab_periodic"},
	{key: svcPG, db: dbPG, cfg: activities.Config{PoolMax: poolMax}, table: "activities"},
	{key: svcCas, db: dbCas, table: activities.DefaultKeyspace},
	{key: svcPGBatch, db: dbPG, cfg: activities.Config{PoolMax: poolMax, Batch: true}, table: "activities_batch"},
	{key: svcCasB, db: dbCas, cfg: activities.Config{Batch: true}, table: activities.DefaultKeyspace + "_batch"},
}

// appMemMB is the memory limit of a service: the report's app containers
// had 2000M beside Postgres and 1000M beside Cassandra.
func appMemMB(sp serviceSpec) int {
	if sp.db == dbPG {
		return 2000
	}
	return 1000
}

// rowPlan is one row to measure: its key and label, the service it
// loads, with how many connections, and the report's figures for it.
type rowPlan struct {
	key   labresult.Key
	label string
	svc   string // a serviceSpec key
	conns int
	ref   *labresult.Ref
}

// ref is the report's wrk figures for a row: requests per second, mean
// and max latency.
func ref(rps, meanMS, maxMS float64) *labresult.Ref {
	return &labresult.Ref{RPS: labresult.F(rps), MeanMS: labresult.F(meanMS), MaxMS: labresult.F(maxMS)}
}

// claimRows are the claims' rows, measured in rounds; otherRows returns
// the others, each set's rows writing to tables of their own.
var claimRows = []rowPlan{
	{pgSQL12, "postgres, the report's app and table (database/sql defaults, no index), 12 connections", svcPGSQL, manyConn, ref(323, 42.74, 199.19)},
	{casP12, "cassandra, the report's table, login and commit log (periodic), 12 connections", svcCasP, manyConn, ref(1213, 18.74, 177.19)},
	{pg12, "ours: postgres, bounded pgx pool, our table (history index), 12 connections", svcPG, manyConn, nil},
	{cas12, "ours: cassandra, durable commit log, our table (partitioned by user), 12 connections", svcCas, manyConn, nil},
}

func otherRows(o lab.Options) []rowPlan {
	rows := []rowPlan{
		{pgSQL1, "postgres, the report's app and table (database/sql defaults, no index), 1 connection", svcPGSQL, 1, ref(521, 2.50, 31.13)},
		{casP1, "cassandra, the report's table, login and commit log (periodic), 1 connection", svcCasP, 1, ref(355, 2.81, 14.13)},
		{pgSQLOur12, "ours: postgres, the report's app (database/sql defaults) on our table (history index), 12 connections", svcPGSQLOur, manyConn, nil},
		{casPOur12, "ours: cassandra, the report's login and commit log (periodic) on our table (partitioned by user), 12 connections", svcCasPOur, manyConn, nil},
		{pgB12, "ours: postgres --batch, 12 connections", svcPGBatch, manyConn, nil},
		{casB12, "ours: cassandra --batch (durable), 12 connections", svcCasB, manyConn, nil},
	}
	if o.Mode == lab.Full {
		rows = append(rows,
			rowPlan{pg1, "ours: postgres, bounded pgx pool, our table (history index), 1 connection", svcPG, 1, nil},
			rowPlan{cas1, "ours: cassandra, durable commit log, our table (partitioned by user), 1 connection", svcCas, 1, nil},
			rowPlan{pgB1, "ours: postgres --batch, 1 connection", svcPGBatch, 1, nil},
			rowPlan{casB1, "ours: cassandra --batch (durable), 1 connection", svcCasB, 1, nil})
	}
	return rows
}

// ratios are the ratios of requests per second shown beside the rows,
// judged against nothing: what the report's setup gives at 1 connection,
// and what each side's setting and --batch are worth at 12.
func ratios() []labresult.Target {
	rps := func(num, den labresult.Key) *labresult.Ratio {
		return &labresult.Ratio{Num: num, Den: den, Metric: labresult.RPS.Name}
	}
	return []labresult.Target{
		{Key: "report-setup-c1", Ratio: rps(casP1, pgSQL1),
			Text: fmt.Sprintf("the report's setup at 1 connection: Cassandra over Postgres, both on the report's tables and apps, requests per second (report: 355 / 521 = %.2f)", 355.0/521.0)},
		{Key: "pg-our-table-c12", Ratio: rps(pgSQLOur12, pgSQL12),
			Text: "what our table costs the report's Postgres app at 12 connections: our table (uuid columns, the history index on (user_id, ts DESC)) over the report's (no index), requests per second"},
		{Key: "cas-our-table-c12", Ratio: rps(casPOur12, casP12),
			Text: "what our table costs the report's Cassandra app at 12 connections: partitioned by user and clustered by time (data as text) over the report's, keyed by id (data as a blob), requests per second; same node, login and commit log"},
		{Key: "pg-pool-c12", Ratio: rps(pg12, pgSQLOur12),
			Text: "what Postgres' pool is worth at 12 connections, both on our table: a bounded pgx pool over the report's database/sql defaults, requests per second"},
		{Key: "cas-periodic-c12", Ratio: rps(casPOur12, cas12),
			Text: "what Cassandra's commit log setting is worth at 12 connections, both on our table: periodic (acknowledged before its fsync, the node authenticating) over durable (batch, no login), requests per second"},
		{Key: "pg-batch-c12", Ratio: rps(pgB12, pg12),
			Text: "what --batch buys Postgres at 12 connections: batched over one insert per request (both with the bounded pgx pool), requests per second"},
		{Key: "cas-batch-c12", Ratio: rps(casB12, cas12),
			Text: "what --batch buys Cassandra at 12 connections: batched over one insert per request (both durable), requests per second"},
		{Key: "pg-batch-vs-cas-c12", Ratio: rps(pgB12, cas12),
			Text: "batched Postgres over durable Cassandra, one insert per request, at 12 connections, requests per second"},
	}
}
