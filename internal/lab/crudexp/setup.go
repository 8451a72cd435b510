package crudexp

import (
	"cmp"
	"fmt"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/tasks"
)

// Setup items the claim's rows pass where the lab sets them up
// (Run.UsedInFirstClaim).
const (
	itemInstance   = "instance"
	itemMaxConns   = "Postgres max_connections"
	itemPool       = "connection pool (optimization 1)"
	itemScenario   = "k6 scenario"
	itemGetQuery   = "the GET's query"
	itemJoinIndex  = "index on the GET's LEFT JOIN column (optimization 3)"
	maxConnections = "410" // the report's Aurora instance's, as it read it from pg_settings
)

// instanceText is the instance the lab gives the service: its quota.
func instanceText(cpu float64, memMB int) string {
	return fmt.Sprintf("%g CPU, %d MB (a cgroup quota), loopback network, no CPU credits", cpu, memMB)
}

// poolText is the database pool a configuration of the service runs with.
func poolText(c tasks.Config) string {
	if c.Deopt.NoPoolLimits {
		return "database/sql's defaults: unlimited open connections, 2 idle, no idle time or lifetime"
	}
	return fmt.Sprintf("pgxpool: max %d open, %d kept, idle time %s, lifetime %s",
		cmp.Or(c.MaxConns, tasks.DefaultMaxConns), cmp.Or(c.MinConns, tasks.DefaultMinConns),
		cmp.Or(c.MaxConnIdleTime, tasks.DefaultMaxConnIdleTime), cmp.Or(c.MaxConnLifetime, tasks.DefaultMaxConnLifetime))
}

// poolItem is the pool setup item's value: all on's pool and all off's.
func poolItem(on, off tasks.Config) string {
	return "all on: " + poolText(on) + "; all off: " + poolText(off)
}

// scenarioText is the load the claim's rows run.
func scenarioText(vus, accounts int) string {
	return fmt.Sprintf("each VU signs in once, then loops create task -> update task -> get task -> delete task; %d VUs on %d accounts, closed model", vus, accounts)
}

// setup sets the experiment's setup beside report C's, item by item.
// Report values are the report's words (in English) where it gives them.
func setup(o lab.Options) []labresult.Setup {
	run, _, users := timing(o)
	fixed := "the report's fixed counts run in --full only"
	if o.Mode == lab.Full {
		fixed = "--full adds the report's fixed counts: 12,000 and 100,000 requests all off, 1,000,000 all on"
	}
	return []labresult.Setup{
		{Item: "service", FirstClaim: true,
			Report: "a monolithic REST API in Go, Gin and GORM (on database/sql), in a Docker container",
			Ours:   "hlab serve tasks: Go 1.26, net/http and pgx v5, a process",
			Why:    "the task API is written without an ORM; the habits of GORM's that the report fixes are switches of the service (a transaction around every write, the user-row update, database/sql's pool defaults) and its GET runs the query GORM's Joins preload and First write"},
		{Item: itemInstance, FirstClaim: true,
			Report: "t2.small: 1 vCPU, 2 GB, 50-100 Mbit/s network, burstable CPU credits",
			Ours:   instanceText(serviceCPU, serviceMemMB),
			Why:    "a cgroup quota is the lab's instance; the network cap and t2's CPU credits (a 20-30% baseline) are not modelled"},
		{Item: "beside the API on the instance", FirstClaim: true,
			Report: "three containers: the development API, the staging API and Alloy; both APIs on one RDS instance",
			Ours:   "the measured configuration alone in its quota; every other configuration runs at once, idle, each in a quota of its own",
			Why:    "one API under load at a time is what each row measures; the collector is the lab's sink (see telemetry)"},
		{Item: "database", FirstClaim: true,
			Report: "Aurora Postgres on AWS RDS (version not given)",
			Ours:   "PostgreSQL 15, local, unconstrained, durable (fsync, synchronous_commit and full_page_writes on)",
			Why:    "Aurora is AWS's own engine; Postgres 15 is the one the project installs (an external one with --postgres)"},
		{Item: itemMaxConns, FirstClaim: true, Report: maxConnections, Ours: maxConnections},
		{Item: itemPool, FirstClaim: true,
			Report: "all on: SetMaxOpenConns, SetMaxIdleConns, SetConnMaxIdleTime, SetConnMaxLifetime (values not given); all off: database/sql's defaults: unlimited open connections, 2 idle, no idle time or lifetime",
			Ours:   poolItem(tasks.Config{}, tasks.Config{Deopt: off.deopt}),
			Why:    "the report gives no values for its limits: ours are the service's defaults"},
		{Item: "load generator", FirstClaim: true,
			Report: "k6, on the author's laptop, over the network",
			Ours:   "hlab load, on the same machine as the service, outside its quota",
			Why:    "k6 is under the AGPL and not added to the project; hlab load runs the same iteration in the same closed model"},
		{Item: itemScenario, FirstClaim: true,
			Report: "create task -> update task -> get task -> delete task; 100 VUs",
			Ours:   scenarioText(vus, vus/devicesPerUser),
			Why:    "the report does not say how its VUs sign in or how many accounts they share: each signs in once, 4 to an account (devices of one user, which the user-row lock bug makes wait for each other)"},
		{Item: "the claim's runs", FirstClaim: true,
			Report: "12,000 requests before (100 VUs x 30 iterations); 1,000,000 requests after, in about 2 hours",
			Ours:   fmt.Sprintf("all on and all off in rounds, their order alternating, runs of %s and at least 2,000 requests after a warm-up; %s", run, fixed),
			Why:    "a ratio with an interval needs repeated runs measured alike, interleaved so that load from elsewhere weighs on both rows"},
		{Item: "schema", FirstClaim: true,
			Report: "GORM models (not shown); the GET LEFT JOINs an associated table",
			Ours:   "users, devices, tasks and task_details (a task's notes, one row per task, task_id a foreign key with ON DELETE CASCADE); migrations 0001-0005, and 0006-0009, whose tables stay empty in the claim's rows (the event log, the notification outbox and the shared login buckets of options those rows leave off; the used WebSocket tickets: the lab's sockets sign in with the header)",
			Why:    "the report shows no model: task_details is the has-one association its GET joins, task_id left unindexed as GORM's AutoMigrate leaves a foreign key; deleting a task cascades to it, so without the index the delete scans task_details too"},
		{Item: itemGetQuery, FirstClaim: true,
			Report: "GORM's First with a LEFT JOIN of an associated table (query text not given; EXPLAIN ANALYZE: LEFT JOIN about 14.6 s, LIMIT another 14.6 s)",
			Ours:   tasks.TaskQuery,
			Why:    "the report shows its plan's times, not its query: ours is what GORM's Joins preload with First writes over the schema above, ORDER BY the primary key, LIMIT 1"},
		{Item: itemJoinIndex, FirstClaim: true,
			Report: "all off: none; all on: indexes on the LEFT JOIN table's fields and the ORDER BY fields",
			Ours:   joinIndexText("none", "CREATE INDEX task_details_task_id_idx ON public.task_details USING btree (task_id)"),
			Why:    "the ORDER BY column is tasks' primary key, indexed with or without the switch; the index the switch adds is the join column's"},
		{Item: "other indexes (optimization 3)", FirstClaim: true,
			Report: "indexes on the fields used in WHERE and ORDER BY (not named)",
			Ours:   "all on: tasks (user_id, created_at DESC, id DESC), (user_id, status, created_at DESC, id DESC), (user_id, due_at, id), (user_id, priority DESC, id DESC); devices (user_id); all off: none",
			Why:    "the report's iteration reads no list: these serve the lists of the richer iteration and the notifications' device lookups, and the all-on row pays them on every create and delete"},
		{Item: "seeded data", FirstClaim: true,
			Report: "not given (the database its GET took 14.6 s on)",
			Ours:   fmt.Sprintf("%d accounts x %d tasks = %d tasks, each with its details row, and %d devices each, interleaved as a live system writes them, in two databases (with and without the indexes)", users, seedTasks, users*seedTasks, seedDevices),
			Why:    "the report does not say how large its tables were; ours is bounded so that seeding takes seconds: large enough that the join dominates the GET's plan without the index, not to take 14.6 s"},
		{Item: "telemetry (optimization 2)", FirstClaim: true,
			Report: "all off: Alloy (an OpenTelemetry collector) uncapped in a container on the instance, starving the API of CPU and memory; all on: the container capped",
			Ours:   "all off: every request traced, spans waiting for room in a full export queue; all on: 1% traced, spans dropped when the queue is full; both export over OTLP to a sink in the lab's process, outside the quota",
			Why:    "no collector competes for the instance's CPU here: the row measures the service's own cost of tracing every request"},
		{Item: "user-row update (optimization 4)", FirstClaim: true,
			Report: "all off: every request updates the user's row in a transaction (the bug); all on: fixed",
			Ours:   "all off: every authenticated request runs in a transaction that first updates the user's row; all on: no such update",
			Why:    "the report describes the bug without its code: ours holds the row's lock for the whole request, as a transaction middleware does"},
		{Item: "transactions (optimization 5)", FirstClaim: true,
			Report: "all off: GORM's default transaction around every write; all on: SkipDefaultTransaction, with their own transaction middleware",
			Ours:   "all off: every write in a transaction of its own; all on: single statements without one, no transaction middleware",
			Why:    "the request-level middleware is not built: each write is one statement"},
		{Item: "open-file limit (optimization 6)", FirstClaim: true,
			Report: "all off: 1,024 per process; all on: raised (Docker Compose ulimits)",
			Ours:   "all off: the soft limit kept at 1,024; all on: raised to the hard limit by the process at start",
			Why:    "the process raises its own limit where the report's compose file did; at 100 VUs neither binds"},
		{Item: "side jobs (optimization 7)", FirstClaim: true,
			Report: "all off: a goroutine per job; all on: an in-memory queue with n workers",
			Ours:   fmt.Sprintf("all off: a goroutine per job; all on: a queue of %d with %d workers", tasks.DefaultQueueSize, tasks.DefaultWorkers),
			Why:    "the report gives no n"},
		{Item: "push notifications and WebSockets", FirstClaim: true,
			Report: "push notifications; a very light WebSocket per device telling it of entity updates",
			Ours:   fmt.Sprintf("a batched webhook POST to a sink in the lab's process (answers 204 at once); %d WebSockets per service, one per account, read by the lab", vus/devicesPerUser),
			Why:    "no push provider here; the report does not say how many sockets were open"},
	}
}
