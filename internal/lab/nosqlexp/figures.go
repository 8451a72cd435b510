package nosqlexp

import "github.com/highload-lab/hlab/internal/lab"

// figures accounts for report A3's figures and statements (its wrk
// outputs, its table, its conclusion and its reasons), each beside the
// row measured under the report's setup (Spec.Setup says what differs).
func figures() []lab.Figure {
	const (
		pg1  = "row: postgres, the report's app and table, 1 connection"
		pg12 = "row: postgres, the report's app and table, 12 connections"
		c1   = "row: cassandra, the report's table, login and commit log, 1 connection"
		c12  = "row: cassandra, the report's table, login and commit log, 12 connections"
	)
	return []lab.Figure{
		lab.Rerun("postgres, 1 connection: 521 rps, 2.50 ms mean (wrk: 521.43 requests/s, 2611 requests in 5.01 s)", pg1),
		lab.Rerun("postgres, 1 connection: latency max 31.13 ms", pg1+" (max)"),
		lab.NotRerunFigure("postgres, 1 connection: latency stdev 2.91 ms; per thread 524.24 req/s (stdev 143.19, max 760); 385.02 KB read, 76.89 KB/s", "wrk's per-thread and transfer statistics: the rows give mean, percentiles and max; our answers are the report's (\"saved! <id>\"), so their bytes are too"),
		lab.Rerun("postgres, 12 connections: 323 rps, 42.74 ms mean (wrk: 323.08 requests/s, 1623 requests in 5.02 s)", pg12),
		lab.Rerun("postgres, 12 connections: latency max 199.19 ms", pg12+" (max)"),
		lab.NotRerunFigure("postgres, 12 connections: latency stdev 40.28 ms; per thread 27.36 req/s (stdev 16.36, max 90); 239.33 KB read, 47.64 KB/s", "wrk's per-thread and transfer statistics (see above)"),
		lab.Rerun("cassandra, 1 connection: 355 rps, 2.81 ms mean (wrk: 355.75 requests/s, 1782 requests in 5.01 s)", c1),
		lab.Rerun("cassandra, 1 connection: latency max 14.13 ms; socket errors: 1 timeout", c1+" (max, errors by kind)"),
		lab.NotRerunFigure("cassandra, 1 connection: latency stdev 806.39 us; per thread 357.46 req/s (stdev 53.13, max 505); 262.78 KB read, 52.46 KB/s", "wrk's per-thread and transfer statistics (see above)"),
		lab.Rerun("cassandra, 12 connections: 1213 rps, 18.74 ms mean (wrk: 1213.30 requests/s, 6103 requests in 5.03 s)", c12),
		lab.Rerun("cassandra, 12 connections: latency max 177.19 ms", c12+" (max)"),
		lab.NotRerunFigure("cassandra, 12 connections: latency stdev 22.30 ms; per thread 101.73 req/s (stdev 30.50, max 222); 0.88 MB read, 178.91 KB/s", "wrk's per-thread and transfer statistics (see above)"),
		lab.Rerun("Cassandra wins by ~3.7x at 12 connections (1213 / 323)", "claim 1, on the report's setup; claim 2 on ours (our tables, both durable, the pool bounded)"),
		lab.Rerun("Postgres wins at one connection (521 vs 355 rps): \"postgres выигрывает у cassandra на 1 потоке и 1 соединении, на более высоких уже сильно уступает\"", "the 1-connection rows side by side, and their shown ratio (report-setup-c1)"),
		lab.Rerun("Cassandra's default periodic commit log (the bitnami image's): acknowledged before its fsync", "the report's rows; claim 2's Cassandra is durable (batch)"),
		lab.Rerun("the Postgres app: lib/pq, sql.Open, no pool settings", "the report's Postgres rows (database/sql, no pool settings; the driver differs: see the setup)"),
		lab.Rerun("the tables: Postgres activities(id varchar primary key, user_id varchar, timestamp timestamp, data jsonb); Cassandra PRIMARY KEY ((id)), data blob, keyspace app RF 1, consistency QUORUM, PasswordAuthenticator", "the report's rows, created by the report's own statements (setup: postgres table, cassandra table, cassandra keyspace)"),
		lab.Rerun("app and database at 1 CPU each; memory 2000M (Postgres side), 1000M (Cassandra side), Cassandra heap 1000M", "the quotas (setup: quotas; Cassandra runs without a memory limit)"),
		lab.Rerun("the motivation: a user's full history, both write- and read-heavy (\"как write-heavy, так и read-heavy\")", "the rows on our tables, built for the history read, and what they cost each store (shown ratios pg-our-table-c12, cas-our-table-c12); the reads themselves are not loaded"),
		lab.NotRerunFigure("monthly tables (activities_01072022, ...) and exports needing many joins", "the report gives no figure for them; the history read on our tables is the one access path the lab builds"),
		lab.NotRerunFigure("Cassandra compresses columnar data well; ScyllaDB is said to be faster", "no figure in the report, and only one Cassandra here"),
		lab.NotRerunFigure("Postgres: sharding and master-master tools, CA; Cassandra: consistent hashing and vnodes, any replica writes, AP", "one node of each: adding and removing nodes is not exercised"),
	}
}
