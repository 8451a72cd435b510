package activities

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
)

// Tables the service writes (Config.Schema).
const (
	// SchemaOurs is the service's own table, built for the history read:
	// Postgres with typed columns and an index on (user_id, ts DESC);
	// Cassandra partitioned by user and clustered newest first. The
	// default.
	SchemaOurs = "ours"
	// SchemaReport is report A3's own table, created by the report's own
	// statements (ReportPostgresTable, ReportCassandraTable) and written
	// as its apps wrote it: no index but the primary key, ids as text in
	// Postgres; a Cassandra table keyed by the activity's id alone, ids
	// from the clock (gocql.UUIDFromTime), the data as a blob and the
	// timestamp in seconds where Cassandra reads milliseconds (the
	// report's app passed time.Now().Unix(); kept, it is what ran). GET
	// /handle answers "saved! <id>" as the report's app did. It is there
	// to rerun the report's setup.
	SchemaReport = "report"
)

// ReportPostgresTable is report A3's Postgres table, its schema.sql as
// the report prints it. The service runs it as it is: it creates the
// table only when missing.
const ReportPostgresTable = `create table if not exists activities
(
id varchar primary key,
user_id varchar,
timestamp timestamp,
data jsonb
);`

// ReportPostgresInsert is report A3's Postgres insert, as its app sent
// it.
const ReportPostgresInsert = `INSERT INTO activities(id, user_id, timestamp, data) VALUES($1, $2, $3, $4)`

// ReportCassandraTable is report A3's Cassandra table, from its
// schema.cql, run in the keyspace the session is bound to, as cqlsh ran
// it after "USE app;".
const ReportCassandraTable = `CREATE TABLE IF NOT EXISTS activities
(
id uuid,
user_id uuid,
timestamp timestamp,
data blob,
PRIMARY KEY ((id))
) WITH comment = 'Table with all activities';`

// ReportCassandraInsert is report A3's Cassandra insert, as its app sent
// it on a session bound to the keyspace.
const ReportCassandraInsert = `INSERT INTO activities (id, user_id, timestamp, data) VALUES (?, ?, ?, ?)`

// PostgresTable is the statement the service with c runs on Postgres at
// start to create its table (when missing).
func (c Config) PostgresTable() string {
	if c.Schema == SchemaReport {
		return ReportPostgresTable
	}
	return pgSchema
}

// PostgresInsert is the statement the service with c inserts an activity
// with on Postgres.
func (c Config) PostgresInsert() string { return pgTableOf(c).insert }

// PostgresClient describes how the service with c reaches Postgres, for
// a run's record of its setup.
func (c Config) PostgresClient() string {
	if c.PGPool == PoolSQLDefaults {
		return "database/sql over pgx v5's stdlib driver, sql.Open and no pool settings (open connections unbounded, 2 idle kept); each statement parsed and described, then executed (two round trips, as lib/pq sends a statement with arguments)"
	}
	return fmt.Sprintf("a pgx v5 pool of at most %d connections, kept open; statements prepared once per connection", cmp.Or(c.PoolMax, DefaultPoolMax))
}

// CassandraKeyspace is the statement the service with c runs on
// Cassandra at start to create its keyspace (when missing).
func (c Config) CassandraKeyspace() string {
	return fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}",
		cmp.Or(c.Keyspace, DefaultKeyspace), max(c.ReplicationFactor, 1))
}

// CassandraTable is the statement the service with c runs on Cassandra
// at start to create its table (when missing): the report's in the
// keyspace its session is bound to, or ours, named in its keyspace.
func (c Config) CassandraTable() string {
	if c.Schema == SchemaReport {
		return ReportCassandraTable
	}
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	user_id uuid,
	ts      timestamp,
	id      uuid,
	data    text,
	PRIMARY KEY ((user_id), ts, id)
) WITH CLUSTERING ORDER BY (ts DESC, id ASC)`, cmp.Or(c.Keyspace, DefaultKeyspace), Table)
}

// CassandraInsert is the statement the service with c inserts an
// activity with on Cassandra.
func (c Config) CassandraInsert() string {
	if c.Schema == SchemaReport {
		return ReportCassandraInsert
	}
	return fmt.Sprintf("INSERT INTO %s.%s (user_id, ts, id, data) VALUES (?, ?, ?, ?)", cmp.Or(c.Keyspace, DefaultKeyspace), Table)
}

// CassandraClient describes the driver settings the service with c
// connects to Cassandra with, for a run's record of its setup.
func (c Config) CassandraClient() string {
	auth := "no authenticator"
	if c.CassandraUser != "" {
		auth = fmt.Sprintf("PasswordAuthenticator (user %s)", c.CassandraUser)
	}
	return fmt.Sprintf("gocql (Apache Cassandra Go driver v2), consistency %s, %s, %d connections per node, timeouts %v",
		cmp.Or(c.Consistency, DefaultConsistency), auth, cmp.Or(c.CassandraConns, DefaultCassandraConns), cmp.Or(c.Timeout, DefaultTimeout))
}

// reportLetters and randSeq are report A3's random string, to the letter:
// runes drawn with math/rand's global functions.
var reportLetters = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

func randSeq(n int) string {
	b := make([]rune, n)
	for i := range b {
		b[i] = reportLetters[rand.Intn(len(reportLetters))]
	}
	return string(b)
}

// randomData is report A3's activity data: the JSON of randSeq(100).
func randomData() json.RawMessage {
	blob, _ := json.Marshal(randSeq(100))
	return blob
}

// reportCassandraActivity is the activity of report A3's Cassandra app:
// its id and its user's from the clock (version 1 UUIDs), each from its
// own time.Now() as the app called it.
func reportCassandraActivity() Activity {
	id := gocql.UUIDFromTime(time.Now())
	data := randomData()
	return Activity{ID: uuid.UUID(id), UserID: uuid.UUID(gocql.UUIDFromTime(time.Now())), Time: time.Now(), Data: data}
}

// reportPostgresActivity is the activity of report A3's Postgres app:
// random ids and time.Now() at its full precision.
func reportPostgresActivity() Activity {
	return Activity{ID: uuid.New(), Data: randomData(), UserID: uuid.New(), Time: time.Now()}
}
