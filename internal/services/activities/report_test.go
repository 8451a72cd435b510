package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/highload-lab/hlab/internal/cqlsession"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/services/activities"
)

// reportDB is the Postgres database of the report's table, made once per
// package run (the shared "activities" database holds ours).
var (
	reportDBOnce sync.Once
	reportDBErr  error
)

const reportDB = "activities_report"

// handleSaved sends the report's request and returns the id its answer
// names, checking the answer is the report's app's: 200, "saved! <id>",
// application/json.
func handleSaved(t *testing.T, e *env) uuid.UUID {
	t.Helper()
	resp, err := e.srv.Client().Get(e.srv.URL + "/handle")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	id, ok := strings.CutPrefix(string(body), "saved! ")
	u, err := uuid.Parse(id)
	if resp.StatusCode != http.StatusOK || !ok || err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /handle: %s %q (%s), want 200 \"saved! <id>\" as application/json", resp.Status, body, resp.Header.Get("Content-Type"))
	}
	return u
}

// dataOf checks data is the JSON of a 100-letter string.
func dataOf(t *testing.T, data []byte) {
	t.Helper()
	var s string
	if err := json.Unmarshal(data, &s); err != nil || len(s) != 100 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		t.Errorf("data %s: want the JSON of 100 letters", data)
	}
}

// TestReportSchemaPostgres: --schema report creates the report's table
// with the report's own statement and nothing else (no index but the
// primary key, ids as text, a timestamp without time zone), stores GET
// /handle's activity as the report's app did, answering as it did, and
// still reads a user's history (by a scan).
func TestReportSchemaPostgres(t *testing.T) {
	p := postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reportDBOnce.Do(func() { reportDBErr = p.CreateDatabase(ctx, reportDB) })
	if reportDBErr != nil {
		t.Fatal(reportDBErr)
	}
	e := newEnv(t, activities.Postgres, func(c *activities.Config) {
		c.DSN, c.Schema, c.PGPool = p.DSN(reportDB), activities.SchemaReport, activities.PoolSQLDefaults
	})
	conn, err := pgx.Connect(ctx, p.DSN(reportDB))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	var cols []string
	rows, _ := conn.Query(ctx, "SELECT column_name || ' ' || data_type FROM information_schema.columns WHERE table_name = 'activities' ORDER BY ordinal_position")
	cols, err = pgx.CollectRows(rows, pgx.RowTo[string])
	want := []string{"id character varying", "user_id character varying", "timestamp timestamp without time zone", "data jsonb"}
	if err != nil || !slices.Equal(cols, want) {
		t.Errorf("columns %q (%v), want the report's %q", cols, err, want)
	}
	rows, _ = conn.Query(ctx, "SELECT indexname FROM pg_indexes WHERE tablename = 'activities'")
	idx, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Equal(idx, []string{"activities_pkey"}) {
		t.Errorf("indexes %q (%v), want the primary key's only", idx, err)
	}

	id := handleSaved(t, e)
	var user string
	var data []byte
	if err := conn.QueryRow(ctx, "SELECT user_id, data FROM activities WHERE id = $1", id.String()).Scan(&user, &data); err != nil {
		t.Fatalf("the activity GET /handle answered %s for: %v", id, err)
	}
	if _, err := uuid.Parse(user); err != nil {
		t.Errorf("user_id %q: want a UUID as text", user)
	}
	dataOf(t, data)

	u := uuid.NewString()
	if code, b, _ := e.post(`{"user_id": "` + u + `", "data": {"page": "/cart"}}`); code != http.StatusCreated {
		t.Fatalf("POST: %d %s", code, b)
	}
	if h := e.history(u); len(h) != 1 || !sameJSON(h[0].Data, []byte(`{"page": "/cart"}`)) {
		t.Errorf("history of %s on the report's table: %+v", u, h)
	}
}

// TestReportSchemaCassandra: --schema report creates the report's table
// (keyed by id alone, data a blob) in a keyspace its session is bound to,
// stores GET /handle's activity as the report's app did (a version 1 id
// from the clock, the timestamp in seconds, which Cassandra reads as
// milliseconds: a date in January 1970), answers as it did, and refuses
// a user's history with 501, which that table cannot serve.
func TestReportSchemaCassandra(t *testing.T) {
	c := depstest.Cassandra(t)
	const ks = "activities_report"
	e := newEnv(t, activities.Cassandra, func(cfg *activities.Config) { cfg.Keyspace, cfg.Schema = ks, activities.SchemaReport })
	s, err := c.Session("")
	if err != nil {
		t.Fatal(err)
	}
	defer cqlsession.Close(s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	kinds := map[string]string{}
	it := s.Query("SELECT column_name, kind FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'activities'", ks).IterContext(ctx)
	var name, kind string
	for it.Scan(&name, &kind) {
		kinds[name] = kind
	}
	if err := it.Close(); err != nil || len(kinds) != 4 || kinds["id"] != "partition_key" || kinds["user_id"] != "regular" || kinds["timestamp"] != "regular" || kinds["data"] != "regular" {
		t.Errorf("columns %v (%v), want the report's: id the partition key, the rest regular", kinds, err)
	}

	before := time.Now().Unix()
	id := handleSaved(t, e)
	var (
		user gocql.UUID
		ts   time.Time
		data []byte
	)
	if err := s.Query("SELECT user_id, timestamp, data FROM "+ks+".activities WHERE id = ?", gocql.UUID(id)).ScanContext(ctx, &user, &ts, &data); err != nil {
		t.Fatalf("the activity GET /handle answered %s for: %v", id, err)
	}
	if id.Version() != 1 || user.Version() != 1 {
		t.Errorf("ids %s, %s: want version 1 (gocql.UUIDFromTime)", id, user)
	}
	if ms := ts.UnixMilli(); ms < before || ms > time.Now().Unix() {
		t.Errorf("timestamp %s (%d ms): want the seconds of the write read as milliseconds, as the report's app stored it", ts, ms)
	}
	dataOf(t, data)

	code, b, _ := e.do("GET", "/activities?user_id="+uuid.NewString(), "", nil)
	if code != http.StatusNotImplemented || !strings.Contains(string(b), "--schema ours") {
		t.Errorf("history on the report's table: %d %s, want 501 naming --schema ours", code, b)
	}
}

// TestSchemaFlag: a table that is neither ours nor the report's is
// refused with a clear error before anything is reached.
func TestSchemaFlag(t *testing.T) {
	_, err := activities.New(context.Background(), activities.Config{Store: activities.Cassandra, Schema: "theirs"})
	if !errors.Is(err, activities.ErrConfig) || !strings.Contains(err.Error(), `--schema "theirs": want ours or report`) {
		t.Errorf("New with --schema theirs: %v, want ErrConfig naming ours and report", err)
	}
}
