// Package nosqlexp is report A3's experiment: the activity service (hlab
// serve activities) writing report A3's activity per request into a real
// Postgres and into a real Cassandra, each database under a 1-CPU quota
// and the service at 1 CPU like the report's containers, under wrk-like
// closed-model load with 1 and 12 connections.
//
// The report's setup first, item by item as the Spec's Setup lists it.
// Its versions, Postgres 14.0 and Cassandra 4.0 (the 4.0 line's last
// release). Its tables, created by its own statements, and its inserts:
// Postgres' activities(id varchar primary key, ...) with no other index,
// Cassandra's keyed by the activity's id alone, in keyspace app, RF 1.
// Its Cassandra was the bitnami 4.0 image with its defaults: a
// PasswordAuthenticator its app logged in to (cassandra/cassandra), and
// the default, periodic commit log: a write is acknowledged before its
// commit-log fsync (synced every 10 s). Its Postgres app used Go's
// database/sql with sql.Open and no pool settings: database/sql then
// keeps 2 idle connections, so with 12 clients most requests open a new
// connection, a new Postgres backend process. Its Postgres ran with the
// image's defaults: durable, a commit waits for its WAL flush. The first
// claim compares those, as the report did.
//
// Then ours, named so, our Cassandra node on 5.0. Our tables, built for
// the history read that motivated the report's move (Postgres indexed on
// (user_id, ts DESC), Cassandra partitioned by user and clustered by
// time), first under the report's apps, to show what the tables alone
// cost; then fairer conditions, the second claim: both durable at
// acknowledgement (Cassandra with commitlog_sync: batch, a write waits for
// the commit-log sync, concurrent writes sharing one; Postgres as before,
// concurrent commits sharing one WAL flush), and the Postgres app with a
// bounded pgx pool. Beside them, what a user would try before switching
// databases (report C's batching): both stores with --batch.
//
// Each Cassandra node warms up before its rows until its throughput stops
// climbing: the JVM compiles its hot paths for tens of seconds on one
// throttled core, and a cold Cassandra measures the JIT, not the
// database. After each set of rows the experiment counts the rows in the
// database and compares them with the writes the load generator saw
// acknowledged (2xx): each service writes to a table of its own (a
// Postgres database, a Cassandra keyspace), truncated before its set, and
// a difference makes the claims on that row INVALID.
//
// Both databases and every service run for the whole experiment; the
// claims' four rows take turns, round by round, their order alternating.
package nosqlexp

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/activities"
)

// name is the experiment's name: "hlab lab nosql".
const name = "nosql"

// The report's setup: app and database at 1 CPU each (the app's memory:
// appMemMB).
const (
	appCPU   = 1.0
	dbCPU    = 1.0
	pgMemMB  = 2000 // the report's Postgres container
	heapMB   = 1024 // Cassandra's -Xmx: the report's
	poolMax  = activities.DefaultPoolMax
	manyConn = 12
	reportX  = 1213.0 / 323.0 // report A3's Cassandra/Postgres RPS at 12 connections
)

// runDur is each measured run's duration: the report's wrk ran 5 s.
const runDur = 5 * time.Second

// Experiment is report A3's SQL-vs-NoSQL experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

func (*Experiment) Spec(o lab.Options) lab.Spec {
	s := lab.Spec{
		Name:  name,
		Title: "SQL vs NoSQL for write-heavy activity data: Postgres and Cassandra, real, 1 CPU each, the report's setup and ours (report A3)",
		Claims: []labresult.Claim{{
			Text:   "Cassandra on the report's setup (its table keyed by id, its login, its default commit log: periodic, a write acknowledged before its fsync) serves >= 2x the requests per second of Postgres on the report's (its table with no index, its app's database/sql with no pool settings), at 12 connections",
			Ratio:  labresult.Ratio{Num: casP12, Den: pgSQL12, Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(2),
			Report: fmt.Sprintf("1213 / 323 = %.2f", reportX), ReportRatio: reportX,
		}, {
			Text:   "ours: on our tables (Postgres' history index; Cassandra partitioned by user), with both durable at acknowledgement (Cassandra's batch commit log) and the Postgres app's pool bounded (pgx), Cassandra serves >= 2x the requests per second of Postgres, at 12 connections",
			Ratio:  labresult.Ratio{Num: cas12, Den: pg12, Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(2),
			Report: "not measured: the report ran its own setup, above",
		}},
		Targets: ratios(),
		Metrics: []labresult.Metric{batchRows, batches, meanBatchRows},
		Figures: figures(),
		Setup:   setup(),
		Needs:   []string{lab.DepPostgres, lab.DepCassandra},
	}
	for _, r := range slices.Concat(claimRows, otherRows(o)) {
		s.Rows = append(s.Rows, lab.RefRow(r.key, r.label, r.ref))
	}
	return s
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	d := 3*time.Second + 20*time.Second + 14*time.Second // Postgres, two Cassandra nodes, the services
	d += 40 * time.Second                                // the nodes' warm-up, typically
	d += min(o.PairBudget(), 5*time.Duration(len(claimRows))*(runDur+500*time.Millisecond))
	d += time.Duration(len(otherRows(o))) * (2*o.Warmup() + time.Duration(o.Repeats())*runDur + time.Second)
	return d
}

func (*Experiment) Run(ctx context.Context, run *lab.Run) error {
	b := &bench{run: run, dir: filepath.Join(run.Opts.WorkDir, name),
		cas: map[string]*deps.Cassandra{}, sessions: map[string]*gocql.Session{}, services: map[string]*service{}}
	b.setEnv()
	if err := b.startPostgres(ctx); err != nil {
		return err
	}
	if err := b.startCassandra(ctx); err != nil {
		return err
	}
	if err := b.startServices(ctx); err != nil {
		return err
	}
	if err := b.warmCassandra(ctx); err != nil {
		return err
	}
	if err := b.measureSet(ctx, claimRows, true); err != nil {
		return err
	}
	for _, r := range otherRows(run.Opts) {
		if err := b.measureSet(ctx, []rowPlan{r}, false); err != nil {
			return err
		}
	}
	return nil
}

// bench is what the phases share: the databases, the lab's sessions to
// them and the services (each stopped by run.Cleanup when Run returns).
type bench struct {
	run      *lab.Run
	dir      string // the experiment's logs
	pg       *deps.Postgres
	cas      map[string]*deps.Cassandra // by database name (dbCas, dbCasPerio)
	sessions map[string]*gocql.Session  // the lab's, by database name
	services map[string]*service        // by serviceSpec key
}

// setEnv records what the rows share beyond the Spec's Setup.
func (b *bench) setEnv() {
	run := b.run
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("app", fmt.Sprintf("hlab serve activities, %.0f CPU each, 2000 MB beside Postgres and 1000 MB beside Cassandra (GOMAXPROCS follows the quota); each service's table, client and login are in the setup",
		appCPU))
	run.SetEnv("load", fmt.Sprintf("hlab load, closed model (wrk -cN), GET /handle: one random activity inserted per request (report A3); runs of %v after a warm-up; the claims' rows in rounds, their order alternating", runDur))
	run.SetEnv("batch", fmt.Sprintf("--batch: sealed at %d rows, %v after its first row, or at once when a flusher is free; %d flushers; postgres: COPY, one transaction per batch; cassandra: an unlogged batch per partition (user), partitions written concurrently",
		activities.DefaultBatchRows, activities.DefaultBatchDelay, activities.DefaultBatchFlushers))
}

var _ lab.Experiment = (*Experiment)(nil)
