package replicaexp

import "github.com/highload-lab/hlab/internal/labresult"

// The experiment's own figures, as rows carry them (Row.Figures).
var (
	// Where a row's CPU went (compare.go's cores), to tell whether it was
	// bound by its service or by the machine.
	postgresCores = labresult.Metric{Name: "postgres_cpu", Unit: "cores", Better: labresult.Lower,
		Doc: "CPU Postgres used, averaged over the row's runs (0 on an external server, which the lab does not measure)"}
	loadgenCores = labresult.Metric{Name: "loadgen_cpu", Unit: "cores", Better: labresult.Neither,
		Doc: "CPU the lab process (the load generator) used, averaged over the row's runs"}
	machineCores = labresult.Metric{Name: "machine_cpu", Unit: "cores", Better: labresult.Neither,
		Doc: "CPU the whole machine used (/proc/stat), averaged over the row's runs"}
	mongoCores = labresult.Metric{Name: "mongo_cpu", Unit: "cores", Better: labresult.Lower,
		Doc: "CPU the MongoDB stand-in used over the row's window"}

	// Database work per request.
	dbQueries = labresult.Metric{Name: "db_queries", Better: labresult.Neither,
		Doc: "queries the service sent to Postgres over the row's runs (db_queries_total)"}
	pricingRequests = labresult.Metric{Name: "pricing_requests", Better: labresult.Neither,
		Doc: "requests the pricing service answered over the row's runs (pricing_requests_total)"}
	queriesPerRequest = labresult.Metric{Name: "queries_per_request", Unit: "queries", Better: labresult.Lower,
		Doc: "DB queries per request: the service's own count over its requests (0 where it reads the replica only)"}
	postgresCPUPerRequest = labresult.Metric{Name: "postgres_cpu_us_per_request", Unit: "µs", Better: labresult.Lower,
		Doc: "Postgres CPU per request served"}
	serviceCPUPerRequest = labresult.Metric{Name: "service_cpu_us_per_request", Unit: "µs", Better: labresult.Lower,
		Doc: "service CPU per request served"}

	// The replica's memory, as the catalog service estimates it (package
	// replica's Stats.Bytes; the package doc's Memory says what it counts).
	bytesPerRow = labresult.Metric{Name: "bytes_per_row", Unit: "B", Better: labresult.Lower,
		Doc: "memory per customer row of the catalog service's replica, with its listing index (replica_table_bytes_per_row{table=\"customers\"}, an estimate within about a quarter of the live heap)"}
	replicaMB = labresult.Metric{Name: "replica_mb", Unit: "MB", Better: labresult.Lower,
		Doc: "memory the catalog service's replica holds in all (replica_table_bytes, summed over its tables, in MiB)"}

	// Write loads: of the freshness rows and around the faults.
	writesPerS = labresult.Metric{Name: "writes_per_s", Unit: "writes/s", Better: labresult.Higher,
		Doc: "update transactions the write load completed per second (its target: 1,000)"}
	faultWrites = labresult.Metric{Name: "writes", Better: labresult.Neither,
		Doc: "updates written around the fault"}
	faultWritesFailed = labresult.Metric{Name: "writes_failed", Better: labresult.Neither,
		Doc: "updates that failed around the fault (while Postgres was away)"}
	probesUnseen = labresult.Metric{Name: "probes_unseen", Better: labresult.Lower,
		Doc: "freshness probes the service did not answer with within 5 s"}

	// A row that does not decode (freshness.go's badInput).
	decodeErrorsService = labresult.Metric{Name: "decode_errors_service", Better: labresult.Neither,
		Doc: "increase of the catalog service's replica_decode_errors_total over the bad-input check"}
	decodeErrorsLab = labresult.Metric{Name: "decode_errors_lab", Better: labresult.Neither,
		Doc: "increase of the lab's replica's decode errors over the bad-input check"}
	badRowCounted = labresult.Metric{Name: "bad_row_counted", Unit: "replicas", Better: labresult.Higher,
		Doc: "replicas (of the service's and the lab's) whose decode errors rose by exactly one for the one bad row"}
	badRowLogged = labresult.Metric{Name: "bad_row_logged", Unit: "replicas", Better: labresult.Higher,
		Doc: "replicas (of the service's and the lab's) whose log names the bad row's key"}
	goodRowServed = labresult.Metric{Name: "good_row_served", Better: labresult.Higher,
		Doc: "1 when the service serves the good row written beside the bad one (200), else 0"}
	badRowServed = labresult.Metric{Name: "bad_row_served", Better: labresult.Lower,
		Doc: "0 when the service answers 404 for the bad row (skipped), else 1"}
	readyAfter = labresult.Metric{Name: "ready", Better: labresult.Higher,
		Doc: "1 when the service's /healthz answers 200 after the bad row, else 0"}

	// Postgres' own benchmark under a replica (pgbench.go).
	pgbenchTPS = labresult.Metric{Name: "tps", Unit: "tx/s", Better: labresult.Neither,
		Doc: "pgbench's transactions per second (without the initial connection)"}
	pgbenchTransactions = labresult.Metric{Name: "transactions", Better: labresult.Neither,
		Doc: "transactions pgbench processed"}
	pgbenchFailed = labresult.Metric{Name: "transactions_failed", Better: labresult.Lower,
		Doc: "transactions pgbench reported failed"}
	rowsCompared = labresult.Metric{Name: "rows_compared", Better: labresult.Neither,
		Doc: "rows of the followed tables compared with Postgres once the replica caught up"}
	caughtUpS = labresult.Metric{Name: "caught_up_s", Unit: "s", Better: labresult.Lower,
		Doc: "from pgbench's end until the replica applied the server's last WAL position"}
	lagP99 = labresult.Metric{Name: "lag_p99_ms", Unit: "ms", Better: labresult.Lower,
		Doc: "99th percentile of commit-to-visible delay per change (the row's p99_ms, named)"}
	decodeErrors = labresult.Metric{Name: "decode_errors", Better: labresult.Lower,
		Doc: "rows the replica could not decode"}
	resyncs = labresult.Metric{Name: "resyncs", Better: labresult.Lower,
		Doc: "times the replica reloaded its tables"}

	// Many replicas starting at once (startatonce.go).
	readyMedianS = labresult.Metric{Name: "ready_median_s", Unit: "s", Better: labresult.Lower,
		Doc: "from the replicas' start until the median one was ready (its snapshot loaded)"}
	readyMaxS = labresult.Metric{Name: "ready_max_s", Unit: "s", Better: labresult.Lower,
		Doc: "from the replicas' start until the last one was ready"}
	postgresCPUPeak = labresult.Metric{Name: "postgres_cpu_peak", Unit: "cores", Better: labresult.Lower,
		Doc: "most CPU Postgres used in one 100 ms sample while the replicas started (0 on an external server)"}
	pgConnsPeak = labresult.Metric{Name: "postgres_conns_peak", Unit: "connections", Better: labresult.Lower,
		Doc: "most connections to the database (pg_stat_activity, every 50 ms) while the replicas started"}

	// The micro-benchmark (mongo.go's micro).
	nsPerOp = labresult.Metric{Name: "ns_per_op", Unit: "ns", Better: labresult.Lower,
		Doc: "testing.Benchmark's ns/op of a user's Get, median over runs"}
	allocsPerOp = labresult.Metric{Name: "allocs_per_op", Better: labresult.Lower,
		Doc: "allocations per Get"}
	bytesPerOp = labresult.Metric{Name: "bytes_per_op", Unit: "B", Better: labresult.Lower,
		Doc: "bytes allocated per Get"}
	storeRatio = labresult.Metric{Name: "ratio", Unit: "x", Better: labresult.Neither,
		Doc: "a store's ns/op over the in-memory replica's"}
	storeReportRatio = labresult.Metric{Name: "report_ratio", Unit: "x", Better: labresult.Neither,
		Doc: "the report's figure for that ratio: about four orders of magnitude"}
)

var metrics = []labresult.Metric{
	postgresCores, loadgenCores, machineCores, mongoCores,
	bytesPerRow, replicaMB,
	dbQueries, pricingRequests, queriesPerRequest, postgresCPUPerRequest, serviceCPUPerRequest,
	writesPerS, faultWrites, faultWritesFailed, probesUnseen,
	decodeErrorsService, decodeErrorsLab, badRowCounted, badRowLogged, goodRowServed, badRowServed, readyAfter,
	pgbenchTPS, pgbenchTransactions, pgbenchFailed, rowsCompared, caughtUpS, lagP99, decodeErrors, resyncs,
	readyMedianS, readyMaxS, postgresCPUPeak, pgConnsPeak,
	nsPerOp, allocsPerOp, bytesPerOp, storeRatio, storeReportRatio,
	readyS, startedFromDisk,
}
