package crudexp

import "github.com/highload-lab/hlab/internal/lab"

// figures accounts for report C's figures (shared/REFERENCE.md).
func figures(o lab.Options) []lab.Figure {
	full := func(figure, rows string) lab.Figure {
		if o.Mode == lab.Full {
			return lab.Rerun(figure, rows)
		}
		return lab.NotRerunFigure(figure, "rerun in --full ("+rows+")")
	}
	return []lab.Figure{
		lab.Rerun("100 VUs x 30 iterations of create, update, get, delete = 12k requests: fine, 52 req/s, mean 278 ms",
			"row: "+allOff+" (the report's figure as its reference); in --full also "+twelveK),
		full(`100k requests: "too many connections" (Postgres max 410)`, "row: "+hundredK),
		lab.Rerun("1. connection pool limits", "row: "+poolOff),
		lab.Rerun("2. cap the telemetry collector's resources (it had starved the API); no figure", "row: "+telemetryOff),
		lab.Rerun("3. indexes on the JOIN and ORDER BY columns: a query from 14.6 s to 50 ms", "row: "+indexOff+" and its list_query_ms; rows: "+richOn+", "+richIndexOff),
		lab.Rerun("4. the per-request user row update (lock contention): 2x throughput", "row: "+touchOn),
		lab.Rerun("5. skip the ORM's per-statement transaction: +30%", "row: "+defaultTx),
		lab.Rerun("6. raise the file-descriptor limit from 1024; no figure", "rows: "+fdOff+"; "+fdOn),
		lab.Rerun("7. a bounded queue with n workers instead of a goroutine per side job; no figure", "row: "+perJob),
		lab.Rerun("together: 5x throughput", "claim 1 ("+allOn+" / "+allOff+")"),
		full("the final run: 1M requests in about 2 hours, 10-13k requests per minute, CPU peak 60%, 150 MB, mean about 2 s", "row: "+million),
		lab.NotRerunFigure("each query 200-400 ms in the final run", "quoted in the 1M row's note beside our latencies and the list query's time; the report does not say which queries"),
		lab.Rerun("65% reads / 35% writes", "the richer iteration's rows (lists after the get)"),
		lab.NotRerunFigure("traces, metrics, logs and profiles through an OpenTelemetry collector", "the lab's own process receives the service's OTLP export, outside the service's quota: row 2 is the service's cost of tracing, not a collector competing for its CPU"),
		lab.NotRerunFigure("Gin + GORM", "the service is net/http and pgx; the ORM's habits (a transaction per statement) are switches 4 and 5"),
	}
}
