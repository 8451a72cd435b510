package nosqlexp

import "github.com/highload-lab/hlab/internal/lab"

// figures accounts for report A3's figures (shared/REFERENCE.md).
func figures() []lab.Figure {
	return []lab.Figure{
		lab.Rerun("postgres, 1 connection: 521 rps, 2.50 ms mean", "row: postgres, database/sql defaults (the report's app), 1 connection"),
		lab.Rerun("postgres, 12 connections: 323 rps, 42.74 ms mean", "row: postgres, database/sql defaults (the report's app), 12 connections"),
		lab.Rerun("cassandra, 1 connection: 355 rps, 2.81 ms mean", "row: cassandra, periodic commit log (the report's default), 1 connection"),
		lab.Rerun("cassandra, 12 connections: 1213 rps, 18.74 ms mean", "row: cassandra, periodic commit log (the report's default), 12 connections"),
		lab.Rerun("Cassandra wins by ~3.7x at 12 connections", "claim 1 (the report's setup); claim 2 with both durable and the pool bounded"),
		lab.Rerun("Cassandra loses at one connection (355 vs 521 rps)", "the 1-connection rows, side by side (not judged)"),
		lab.Rerun("Cassandra's default periodic commit log: acknowledged before its fsync", "the periodic rows; the batch rows are the durable variant"),
		lab.Rerun("the Postgres app: database/sql, sql.Open, no pool settings", "the database/sql rows; the pgx rows bound the pool"),
		lab.Rerun("consistency QUORUM, RF 1; app and database at 1 CPU each", "the environment: keyspace, consistency and quotas"),
	}
}
