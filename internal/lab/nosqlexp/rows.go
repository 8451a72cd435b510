package nosqlexp

import (
	"fmt"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/activities"
)

// Row keys: the store, its setting, the connections.
const (
	pgSQL1  labresult.Key = "postgres/sql-defaults/c1"
	casP1   labresult.Key = "cassandra/periodic/c1"
	pgSQL12 labresult.Key = "postgres/sql-defaults/c12"
	casP12  labresult.Key = "cassandra/periodic/c12"
	pg1     labresult.Key = "postgres/pgx-pool/c1"
	cas1    labresult.Key = "cassandra/durable/c1"
	pg12    labresult.Key = "postgres/pgx-pool/c12"
	cas12   labresult.Key = "cassandra/durable/c12"
	pgB1    labresult.Key = "postgres/batch/c1"
	casB1   labresult.Key = "cassandra/batch/c1"
	pgB12   labresult.Key = "postgres/batch/c12"
	casB12  labresult.Key = "cassandra/batch/c12"
)

// The services, each writing to a table of its own (a Postgres database
// or a Cassandra keyspace).
const (
	svcPGSQL   = "postgres --pg-pool sql-defaults"
	svcCasP    = "cassandra (commitlog periodic)"
	svcPG      = "postgres"
	svcCas     = "cassandra (commitlog batch)"
	svcPGBatch = "postgres --batch"
	svcCasB    = "cassandra --batch"
)

// Databases.
const (
	dbPG       = "postgres"
	dbCas      = "cassandra"
	dbCasPerio = "cassandra-periodic"
)

type serviceSpec struct {
	key string
	db  string
	// cfg is what the service changes from the defaults; the database it
	// reaches (Store, DSN or Cassandra, Keyspace) is filled in at start.
	cfg   activities.Config
	table string // Postgres database or Cassandra keyspace
}

var serviceSpecs = []serviceSpec{
	{key: svcPGSQL, db: dbPG, cfg: activities.Config{PGPool: activities.PoolSQLDefaults}, table: "activities_sql_defaults"},
	{key: svcCasP, db: dbCasPerio, table: activities.DefaultKeyspace},
	{key: svcPG, db: dbPG, cfg: activities.Config{PoolMax: poolMax}, table: "activities"},
	{key: svcCas, db: dbCas, table: activities.DefaultKeyspace},
	{key: svcPGBatch, db: dbPG, cfg: activities.Config{PoolMax: poolMax, Batch: true}, table: "activities_batch"},
	{key: svcCasB, db: dbCas, cfg: activities.Config{Batch: true}, table: activities.DefaultKeyspace + "_batch"},
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

func ref(rps, meanMS float64) *labresult.Ref {
	return &labresult.Ref{RPS: labresult.F(rps), MeanMS: labresult.F(meanMS)}
}

// claimRows are the claims' rows, measured in rounds; otherRows returns
// the others, each set's rows writing to tables of their own.
var claimRows = []rowPlan{
	{pgSQL12, "postgres, database/sql defaults (the report's app), 12 connections", svcPGSQL, manyConn, ref(323, 42.74)},
	{casP12, "cassandra, periodic commit log (the report's default), 12 connections", svcCasP, manyConn, ref(1213, 18.74)},
	{pg12, "postgres, bounded pgx pool, 12 connections", svcPG, manyConn, nil},
	{cas12, "cassandra, durable commit log, 12 connections", svcCas, manyConn, nil},
}

func otherRows(o lab.Options) []rowPlan {
	rows := []rowPlan{
		{pgSQL1, "postgres, database/sql defaults (the report's app), 1 connection", svcPGSQL, 1, ref(521, 2.50)},
		{casP1, "cassandra, periodic commit log (the report's default), 1 connection", svcCasP, 1, ref(355, 2.81)},
		{pgB12, "postgres --batch, 12 connections", svcPGBatch, manyConn, nil},
		{casB12, "cassandra --batch (durable), 12 connections", svcCasB, manyConn, nil},
	}
	if o.Mode == lab.Full {
		rows = append(rows,
			rowPlan{pg1, "postgres, bounded pgx pool, 1 connection", svcPG, 1, nil},
			rowPlan{cas1, "cassandra, durable commit log, 1 connection", svcCas, 1, nil},
			rowPlan{pgB1, "postgres --batch, 1 connection", svcPGBatch, 1, nil},
			rowPlan{casB1, "cassandra --batch (durable), 1 connection", svcCasB, 1, nil})
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
			Text: fmt.Sprintf("the report's setup at 1 connection: Cassandra (periodic commit log) over Postgres (database/sql defaults), requests per second (report: 355 / 521 = %.2f)", 355.0/521.0)},
		{Key: "pg-pool-c12", Ratio: rps(pg12, pgSQL12),
			Text: "what Postgres' pool is worth at 12 connections: a bounded pgx pool over the report's database/sql defaults, requests per second"},
		{Key: "cas-periodic-c12", Ratio: rps(casP12, cas12),
			Text: "what Cassandra's commit log setting is worth at 12 connections: periodic (acknowledged before its fsync) over durable (batch), requests per second"},
		{Key: "pg-batch-c12", Ratio: rps(pgB12, pg12),
			Text: "what --batch buys Postgres at 12 connections: batched over one insert per request (both with the bounded pgx pool), requests per second"},
		{Key: "cas-batch-c12", Ratio: rps(casB12, cas12),
			Text: "what --batch buys Cassandra at 12 connections: batched over one insert per request (both durable), requests per second"},
		{Key: "pg-batch-vs-cas-c12", Ratio: rps(pgB12, cas12),
			Text: "batched Postgres over durable Cassandra, one insert per request, at 12 connections, requests per second"},
	}
}
