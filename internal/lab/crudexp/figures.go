package crudexp

import "github.com/highload-lab/hlab/internal/lab"

// figures accounts for report C's figures (shared/REFERENCE.md), quoted
// as the report gives them (in English).
func figures(o lab.Options) []lab.Figure {
	full := func(figure, rows string) lab.Figure {
		if o.Mode == lab.Full {
			return lab.Rerun(figure, rows)
		}
		return lab.NotRerunFigure(figure, "rerun in --full ("+rows+")")
	}
	const noBytes = "the lab's load driver does not count bytes on the wire (k6's data_sent and data_received include the headers of Gin's answers and k6's requests, which are not ours)"
	return []lab.Figure{
		lab.Rerun("the instance: t2.small, 1 vCPU, 2 GB", "the service's quota in every row (setup: instance)"),
		lab.NotRerunFigure("the instance's 50-100 Mbit/s network", "loopback here (setup: instance)"),
		lab.Rerun("100 VUs x 30 iterations of create, update, get, delete = 12k requests: fine (no memory leak, CPU pressure or bottleneck), more than 52 req/s on average, mean latency 278 ms",
			"row: "+allOff+" (the report's figures as its reference); in --full also "+twelveK),
		lab.NotRerunFigure("the 12k run: 13 MB sent, 89 MB received", noBytes),
		full("the 100k run: about 40 minutes, about 2,500 requests per minute, CPU 60%, memory 50%", "row: "+hundredK+" (its req_per_min, CPU average and peak, RSS)"),
		lab.NotRerunFigure("the 100k run: 66 MB sent, 462 MB received", noBytes),
		full(`the 100k run: "too many connections" (max_connections 410)`, "row: "+hundredK+", on a Postgres with max_connections 410"),
		lab.Rerun("1. connection pool limits", "row: "+poolOff),
		lab.NotRerunFigure("after the pool fix: the server failed after about 500k requests at 4,000 requests per minute, within 20 minutes, the OpenTelemetry collector (Alloy) taking the CPU and memory",
			"no collector shares the service's quota here (setup: telemetry), and no 500k-request run of the pool-fixed configuration is made: row 2 is the service's own cost of tracing every request"),
		lab.NotRerunFigure("then: context-canceled errors (requests timed out, connections closed), and after a while a mean latency of 30-40 s",
			"the service bounds a request's database work at 5 s and answers 503 past it (the slow rows' failures, by kind, are in their notes); no row runs long enough to build 30-40 s queues"),
		lab.Rerun("2. cap the telemetry collector's resources (it had starved the API); no figure", "row: "+telemetryOff),
		lab.Rerun(`"our queries in GET operations were very slow": EXPLAIN ANALYZE, LEFT JOIN about 14.6 s and LIMIT another 14.6 s`,
			"get_query_ms and get_join_ms of rows "+allOff+" and "+indexOff+" (EXPLAIN ANALYZE of the GET's LEFT JOIN on the seeded data, without the join's index; the plan in a note); target get-join-share"),
		lab.Rerun("3. indexes on the LEFT JOIN table's and ORDER BY fields: the same query about 50 ms, from 14.6 s",
			"get_query_ms of the rows with the index, and the ratio get-query-ratio/indexes; the rows "+indexOff+" and "+allOff+" run the GET without it"),
		lab.Rerun("indexes on fields used in WHERE or ORDER BY: up to 5x for queries", "the ratios get-query-ratio/indexes and list-query-ratio/indexes; rows: "+richOn+", "+richIndexOff),
		lab.NotRerunFigure("indexes added blindly slow CREATE/UPDATE/DELETE gradually", "not measured apart: the all-on rows pay their indexes on every create and delete"),
		lab.Rerun("4. the per-request user row update (lock contention): 2x throughput", "row: "+touchOn),
		lab.Rerun("5. skip GORM's default transaction: at least 30%", "row: "+defaultTx),
		lab.NotRerunFigure("stuck at 4-5k requests per minute before the last fixes (thought to be the laptop's bandwidth)",
			"the report does not say which fixes were in at that plateau; rows 4 and 5 switch one fix off each"),
		lab.Rerun("6. raise the file-descriptor limit from 1024; no figure", "rows: "+fdOff+"; "+fdOn),
		lab.Rerun("7. a bounded queue with n workers instead of a goroutine per side job; no figure", "row: "+perJob),
		lab.Rerun("together: 5x throughput", "claim 1 ("+allOn+" / "+allOff+")"),
		lab.NotRerunFigure("after the fixes, the laptop alone generates 12-18k requests per minute",
			"a figure of the report's load generator, not of the API: hlab load runs on the lab's machine (env: load)"),
		full("the final run: 1M requests in about 2 hours, about 10-13k requests per minute, CPU peak 60%, memory only 150 MB, mean latency about 2 s", "row: "+million+" (the report's rate and mean as its reference)"),
		lab.NotRerunFigure("each query 200-400 ms in the final run", "quoted in the 1M row's note beside our latencies; the report does not say which queries"),
		lab.NotRerunFigure("Alloy restarted at its resource limits during the final run and lost the metrics", "no collector runs here"),
		lab.NotRerunFigure("from 50k to 1M requests (about 16k requests per minute)", "the title's rate; the report's final run gives 10-13k per minute, the figure the 1M row is set beside"),
		lab.Rerun("65% reads / 35% writes", "the richer iteration's rows (lists after the get)"),
		lab.NotRerunFigure("traces, metrics, logs and profiles through an OpenTelemetry collector", "the lab's own process receives the service's OTLP export, outside the service's quota: row 2 is the service's cost of tracing, not a collector competing for its CPU"),
		lab.NotRerunFigure("Gin + GORM", "the service is net/http and pgx; the ORM's habits (a transaction per statement, the GET's LEFT JOIN) are switches 4 and 5 and the GET's query (setup: the GET's query)"),
		lab.NotRerunFigure("next steps: t3/t3a instances, batching INSERTs, denormalizing away the LEFT JOIN, caching, sharding and partitioning, profiling, breakpoint testing",
			"the report's plans, not its results"),
	}
}
