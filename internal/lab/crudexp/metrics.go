package crudexp

import "github.com/highload-lab/hlab/internal/labresult"

// The experiment's own figures (Row.Figures), beside the standard ones.
var (
	// Counters of the task API, increases summed over a row's runs.
	dbDials = labresult.Metric{Name: "db_dials", Better: labresult.Lower,
		Doc: "connections the service's database pool opened (tasks_db_pool_dials_total), over the row's runs"}
	webhookCalls = labresult.Metric{Name: "webhook_calls", Better: labresult.Neither,
		Doc: "push notifications the service attempted to the webhook (tasks_notify_attempts_total), over the row's runs"}

	// Sampled around each run (bench.around).
	postgresCPU = labresult.Metric{Name: "postgres_cpu", Unit: "cores", Better: labresult.Lower,
		Doc: "CPU of Postgres (unconstrained, outside the service's quota), averaged over the row's runs"}
	otlpMBPerRun = labresult.Metric{Name: "otlp_mb_per_run", Unit: "MB", Better: labresult.Neither,
		Doc: "trace bytes the lab's OTLP sink received per run (spans arrive in batches up to 5 s late: a few of the previous row's may count)"}
	wsEvents = labresult.Metric{Name: "ws_events", Better: labresult.Neither,
		Doc: "task events the configuration's WebSockets (one per account) received over the row's runs"}
	eventsReceived = labresult.Metric{Name: "events_received", Better: labresult.Neither,
		Doc: "task events of acknowledged changes that reached the other instance's devices (the delivery row)"}
	failed = labresult.Metric{Name: "failed_requests", Better: labresult.Lower,
		Doc: "requests without a 2xx or 3xx answer (transport errors and 4xx/5xx), over the row's runs"}

	// The list query timed straight on the row's database, without the service.
	listQueryMS = labresult.Metric{Name: "list_query_ms", Unit: "ms", Better: labresult.Lower,
		Doc: "the list endpoint's query for one seeded account no VU uses, run on the row's database directly: the median of 7 runs"}

	// The GET's query (tasks.TaskQuery) explained on the row's database
	// as seeded, before any load (explain.go).
	getQueryMS = labresult.Metric{Name: "get_query_ms", Unit: "ms", Better: labresult.Lower,
		Doc: "EXPLAIN ANALYZE's execution time of the task GET's query (the task LEFT JOIN its details, ORDER BY id LIMIT 1) for a seeded task, on the row's database as seeded: the median of 3"}
	getJoinMS = labresult.Metric{Name: "get_join_ms", Unit: "ms", Better: labresult.Lower,
		Doc: "the actual time of that plan's join node, its children included (the report's LEFT JOIN at about 14.6 s)"}

	// The fixed-count rows' figures, as the report gives its runs'.
	seconds = labresult.Metric{Name: "seconds", Unit: "s", Better: labresult.Lower,
		Doc: "how long the fixed count of requests took (requests / goodput)"}
	reqPerMin = labresult.Metric{Name: "req_per_min", Unit: "req/min", Better: labresult.Higher,
		Doc: "successful requests per minute, the report's unit for its runs"}
	cpuPeak = labresult.Metric{Name: "cpu_peak", Unit: "cores", Better: labresult.Lower,
		Doc: "the service's highest CPU over 100 ms samples during the run (the report's peak is from coarser monitoring)"}

	// The open-file limit in force, as the service's process collector reads it.
	maxFDs = labresult.Metric{Name: "max_fds", Better: labresult.Neither,
		Doc: "the service's open-file limit (process_max_fds)"}
)

// metrics lists the figures above, for the Spec.
func metrics() []labresult.Metric {
	return []labresult.Metric{dbDials, webhookCalls, postgresCPU, otlpMBPerRun, wsEvents, eventsReceived, failed, listQueryMS, getQueryMS, getJoinMS, seconds, reqPerMin, cpuPeak, maxFDs}
}
