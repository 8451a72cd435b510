package nosqlexp

import (
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/activities"
)

// Setup items the first claim's services and databases are held to
// (Run.UsedInFirstClaim), where the experiment passes them.
const (
	itemPGVersion    = "postgres version"
	itemPGSettings   = "postgres settings"
	itemPGClient     = "postgres client"
	itemPGTable      = "postgres table"
	itemPGInsert     = "postgres insert"
	itemCasVersion   = "cassandra version"
	itemCasAuth      = "cassandra authentication"
	itemCasTokens    = "cassandra tokens"
	itemCasCommitlog = "cassandra commit log"
	itemCasKeyspace  = "cassandra keyspace"
	itemCasTable     = "cassandra table"
	itemCasInsert    = "cassandra insert"
	itemCasClient    = "cassandra client"
)

// reportTokens is the report's node's vnodes: the bitnami image's
// CASSANDRA_NUM_TOKENS.
const reportTokens = 256

// pgImageSettings are the report's postgres:14.0 image's settings, which
// are Postgres' defaults, as the lab's cluster runs them
// (reportPGSettings put back the ones it changes).
const pgImageSettings = "fsync=on, full_page_writes=on, max_connections=100, max_replication_slots=10, max_wal_senders=10, synchronous_commit=on, wal_level=replica; others at Postgres' defaults (shared_buffers 128MB)"

// The report's app's services as the first claim runs them, for the
// declarations of what they run.
var (
	reportPGApp  = activities.Config{PGPool: activities.PoolSQLDefaults, Schema: activities.SchemaReport}
	reportCasApp = activities.Config{Schema: activities.SchemaReport, Keyspace: reportKeyspace, CassandraUser: "cassandra"}
)

// setup is the experiment's setup beside report A3's, item by item: the
// first claim's (the report's setup, rerun) then ours. Postgres 14.0 is
// zonky's build of it from Maven Central (hlab deps install postgres14),
// where the report ran the postgres:14.0 image.
func setup() []labresult.Setup {
	first := []labresult.Setup{
		{Item: itemPGVersion, Report: "14.0", Ours: "14.0"},
		{Item: itemPGSettings, Report: pgImageSettings, Ours: pgImageSettings},
		{Item: "postgres connection", Report: "host=postgres user=postgres password=postgres dbname=postgres sslmode=disable (the superuser, over the compose network)",
			Ours: "a role of its own that owns the service's database, password login over TCP to 127.0.0.1, sslmode=disable",
			Why:  "no service here runs as the superuser; the login is of the same kind (a password over TCP, no TLS), once per new connection"},
		{Item: itemPGClient,
			Report: "lib/pq: sql.Open(\"postgres\", connStr) and no pool settings (open connections unbounded, 2 idle kept); per request db.QueryRowContext(request.Context(), INSERT ...).Err(): a statement with arguments parsed and described, then executed (two round trips)",
			Ours:   reportPGApp.PostgresClient(),
			Why:    "pgx is the project's one Postgres driver (lib/pq is in maintenance mode); the pool is database/sql's with nothing set, and each statement takes lib/pq's two round trips: what differs is the driver's own code in the app"},
		{Item: itemPGTable, Report: activities.ReportPostgresTable, Ours: reportPGApp.PostgresTable()},
		{Item: itemPGInsert, Report: activities.ReportPostgresInsert, Ours: reportPGApp.PostgresInsert()},
		{Item: itemCasVersion, Report: "4.0 (docker.io/bitnami/cassandra:4.0; the report does not say which 4.0.x)", Ours: deps.Cassandra40Version,
			Why: "the 4.0 line's last release, from Maven Central's cassandra-all (the image's exact 4.0.x is not known)"},
		{Item: "cassandra JVM", Report: "the image's Java 8 (bitnami's 4.0 image ships 1.8) with Cassandra 4.0's JVM options (CMS); MAX_HEAP_SIZE=1000M, HEAP_NEWSIZE=1000M",
			Ours: "Java 17 with Cassandra 5.0's jvm17-server.options (G1) and the --add-opens 4.0 needs on 17; -Xms/-Xmx 1024m, no -Xmn",
			Why:  "Debian 12 packages Java 17 only (4.0 supports 8 and 11, and starts on 17 with four more --add-opens); Java 17 has no CMS (removed in Java 14), and a young generation as large as the heap (HEAP_NEWSIZE=1000M) is not a G1 setting"},
		{Item: itemCasAuth, Report: "authenticator: PasswordAuthenticator, authorizer: CassandraAuthorizer", Ours: "authenticator: PasswordAuthenticator, authorizer: CassandraAuthorizer"},
		{Item: itemCasCommitlog, Report: "commitlog_sync: periodic, commitlog_sync_period_in_ms: 10000", Ours: "commitlog_sync: periodic, commitlog_sync_period_in_ms: 10000"},
		{Item: itemCasTokens, Report: "num_tokens: 256", Ours: "num_tokens: 256"},
		{Item: itemCasKeyspace,
			Report: "DROP KEYSPACE IF EXISTS app; CREATE KEYSPACE app WITH replication = { 'class': 'SimpleStrategy', 'replication_factor': 1 }; USE app; (cqlsh, before the app starts)",
			Ours:   reportCasApp.CassandraKeyspace(),
			Why:    "the service creates its keyspace when missing and never drops one: the lab truncates the table before each set of rows instead, so each starts empty as the report's new keyspace did; the app's session is bound to app (cluster.Keyspace), as the report's app's was"},
		{Item: itemCasTable, Report: activities.ReportCassandraTable, Ours: reportCasApp.CassandraTable()},
		{Item: itemCasInsert, Report: activities.ReportCassandraInsert, Ours: reportCasApp.CassandraInsert()},
		{Item: itemCasClient,
			Report: "gocql (github.com/gocql/gocql), consistency Quorum, PasswordAuthenticator (cassandra/cassandra), the driver's other defaults: 2 connections per host, 600 ms timeouts",
			Ours:   reportCasApp.CassandraClient(),
			Why:    "the gocql project moved to Apache as cassandra-gocql-driver v2 (github.com/gocql/gocql stops at v1.7), same protocol and connection model; every request's database work is bounded at 2 s here, so a write slower than 600 ms, which failed in the report's app, waits here (the row's errors and p99 show whether one did)"},
		{Item: "activity",
			Report: "id and user_id uuid.New().String() (Postgres) or gocql.UUIDFromTime(time.Now()) (Cassandra); time.Now() (Cassandra: time.Now().Unix(), seconds where Cassandra reads milliseconds); data json.Marshal(randSeq(100)), 100 runes of a-zA-Z from math/rand's global functions, passed as a string (Postgres) or bytes (Cassandra)",
			Ours:   "id and user_id uuid.New().String() (Postgres) or gocql.UUIDFromTime(time.Now()) (Cassandra); time.Now() (Cassandra: time.Now().Unix(), seconds where Cassandra reads milliseconds); data json.Marshal(randSeq(100)), 100 runes of a-zA-Z from math/rand's global functions, passed as a string (Postgres) or bytes (Cassandra)"},
		{Item: "app", Report: "Go 1.19 (golang:1.19), net/http: GET /handle generates the activity, inserts it, answers \"saved! <id>\" (application/json)",
			Ours: "Go 1.26, hlab serve activities --schema report: net/http under the project's server (request metrics, read and write timeouts, /healthz, /metrics); GET /handle generates the activity, inserts it within 2 s, answers \"saved! <id>\" (application/json)",
			Why:  "the lab checks each service through /healthz and samples it through /metrics, and every call out is bounded; since Go 1.20 math/rand's global functions draw without the lock they took in Go 1.19"},
		{Item: "quotas",
			Report: "app cpus: '1', memory: 2000M; postgres cpus: '1', memory: 2000M. app cpus: '1', memory: 1000M; cassandra cpus: '1', memory: 1000M",
			Ours:   "app 1 CPU, 2000 MB; postgres 1 CPU, 2000 MB. app 1 CPU, 1000 MB; cassandra 1 CPU, no memory limit",
			Why:    "a 1 GB heap alone fills a 1000M limit, and Cassandra's process holds about 1.5 GB here at -Xmx1g: the limit would kill it (docker let the report's container swap as much again)"},
		{Item: "load", Report: "wrk -t1 -c1 -d5s and wrk -t12 -c12 -d5s http://app:8890/handle, one run per row",
			Ours: "hlab load, closed model, 1 and 12 connections, runs of 5 s after a warm-up; the claim's rows in interleaved rounds, medians",
			Why:  "hlab load's closed model is wrk's, timed the same way; warm-up and rounds give the ratio an interval (the report's author averaged dozens of runs)"},
		{Item: "what ran where", Report: "wrk, the app and the database each in a container on one docker compose network (Docker Desktop)",
			Ours: "the load generator outside the quotas, the app and the database each under its own cgroup quota, on 127.0.0.1",
			Why:  "no container engine here; cgroups give the containers' CPU and memory limits, and the loopback stands for the compose network"},
	}
	for i := range first {
		first[i].FirstClaim = true
	}
	ours := []labresult.Setup{
		{Item: "ours: postgres table", Report: activities.ReportPostgresTable, Ours: (activities.Config{}).PostgresTable(),
			Why: "ours, in the rows named so: the history read that motivated the report's move (a user's activities, newest first) needs the index, which every insert pays"},
		{Item: "ours: cassandra table", Report: activities.ReportCassandraTable, Ours: (activities.Config{Keyspace: activities.DefaultKeyspace}).CassandraTable(),
			Why: "ours, in the rows named so: a user's history is one partition read in order; the report's table can only be read by id"},
		{Item: "ours: postgres pool (claim 2)", Report: "database/sql with no pool settings", Ours: (activities.Config{PoolMax: poolMax}).PostgresClient(),
			Why: "ours: a bounded pool kept open, so no request pays for a new connection and a new backend process"},
		{Item: "ours: cassandra node (claim 2)", Report: "Cassandra 4.0; authenticator: PasswordAuthenticator; commitlog_sync: periodic (a write acknowledged before its fsync)",
			Ours: "Cassandra " + deps.CassandraVersion + "; authenticator: AllowAllAuthenticator; commitlog_sync: batch (a write acknowledged after its fsync, concurrent writes sharing one)",
			Why:  "ours: the current Cassandra, durable at acknowledgement like Postgres, so the claim compares databases, not durability"},
	}
	return append(first, ours...)
}
