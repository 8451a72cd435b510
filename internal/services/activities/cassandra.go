package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/highload-lab/hlab/internal/cqlsession"
	"regexp"
	"strings"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
)

// DefaultKeyspace is the Cassandra keyspace the service creates and uses.
const DefaultKeyspace = "hlab"

var cqlName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// cassandraStore keeps activities in Cassandra, in our table, partitioned
// by user and clustered newest first (a user's history is one partition,
// read in order), or in the report's (SchemaReport), keyed by id alone.
type cassandraStore struct {
	s      *gocql.Session
	cons   gocql.Consistency
	insert string
	values func(Activity) []any // insert's
	// partition is an activity's partition key: a batch holds one
	// partition's rows.
	partition func(Activity) uuid.UUID
	recent    string // "" when the table has no history read
}

var _ Store = (*cassandraStore)(nil)

func openCassandra(ctx context.Context, cfg Config) (*cassandraStore, error) {
	if !cqlName.MatchString(cfg.Keyspace) {
		return nil, fmt.Errorf("%w: --keyspace %q: want lower-case letters, digits and _", ErrConfig, cfg.Keyspace)
	}
	cons, err := gocql.ParseConsistencyWrapper(cfg.Consistency)
	if err != nil {
		return nil, fmt.Errorf("%w: --consistency: %v", ErrConfig, err)
	}
	var hosts []string
	for _, h := range strings.Split(cfg.Cassandra, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%w: --cassandra: give host:port of at least one node", ErrConfig)
	}
	cl := gocql.NewCluster(hosts...)
	cl.Consistency = cons
	cl.Timeout = cfg.Timeout
	cl.ConnectTimeout = cfg.Timeout
	cl.NumConns = cfg.CassandraConns
	if cfg.CassandraUser != "" {
		cl.Authenticator = gocql.PasswordAuthenticator{Username: cfg.CassandraUser, Password: cfg.CassandraPassword}
	}
	// A node that went down is tried again every second (the driver's
	// default is a minute), so the service recovers soon after it returns.
	cl.ReconnectInterval = time.Second
	cl.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 10, Interval: time.Second}
	s, err := cl.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("%w: cassandra at %s: %w", ErrUnavailable, cfg.Cassandra, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := schema(ctx, s, cfg.CassandraKeyspace()); err != nil {
		cqlsession.Close(s)
		return nil, err
	}
	cs := &cassandraStore{s: s, cons: cons, insert: cfg.CassandraInsert()}
	if cfg.Schema == SchemaReport {
		// The report's app's session was bound to its keyspace
		// (cluster.Keyspace) and named its table bare: so does this one,
		// once the keyspace exists.
		cqlsession.Close(s)
		cl.Keyspace = cfg.Keyspace
		if cs.s, err = cl.CreateSession(); err != nil {
			return nil, fmt.Errorf("%w: cassandra at %s, keyspace %s: %w", ErrUnavailable, cfg.Cassandra, cfg.Keyspace, err)
		}
		// The timestamp in seconds where Cassandra reads milliseconds:
		// the report's app's time.Now().Unix(), kept as what ran.
		cs.values = func(a Activity) []any {
			return []any{gocql.UUID(a.ID), gocql.UUID(a.UserID), a.Time.Unix(), []byte(a.Data)}
		}
		cs.partition = func(a Activity) uuid.UUID { return a.ID }
	} else {
		cs.values = func(a Activity) []any {
			return []any{gocql.UUID(a.UserID), a.Time, gocql.UUID(a.ID), string(a.Data)}
		}
		cs.partition = func(a Activity) uuid.UUID { return a.UserID }
		cs.recent = fmt.Sprintf("SELECT id, ts, data FROM %s.%s WHERE user_id = ? LIMIT ?", cfg.Keyspace, Table)
	}
	if err := schema(ctx, cs.s, cfg.CassandraTable()); err != nil {
		cqlsession.Close(cs.s)
		return nil, err
	}
	return cs, nil
}

// schema runs a schema change (one that creates what is missing) and
// waits for the node to agree on it. Schema changes take a second or
// more each; existing ones cost nothing. They go at consistency ONE
// whatever the service's: they are not data, and QUORUM of a keyspace
// being created means nothing.
func schema(ctx context.Context, s *gocql.Session, stmt string) error {
	if err := s.Query(stmt).Consistency(gocql.One).ExecContext(ctx); err != nil {
		return fmt.Errorf("%w: cassandra: creating the schema: %w", ErrUnavailable, err)
	}
	if err := s.AwaitSchemaAgreement(ctx); err != nil {
		return fmt.Errorf("%w: cassandra: schema agreement: %w", ErrUnavailable, err)
	}
	return nil
}

func (c *cassandraStore) Kind() string { return "cassandra (" + c.cons.String() + ")" }

func (c *cassandraStore) Insert(ctx context.Context, a Activity) error {
	err := c.s.Query(c.insert, c.values(a)...).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("%w: cassandra: %w", ErrUnavailable, err)
	}
	return nil
}

// InsertBatch writes rows as one unlogged batch per partition (a user on
// our table, an activity on the report's), all partitions at once: a
// batch is atomic and cheap only within one partition, and a batch across
// partitions would make one coordinator do the work of many. Each row
// gets its own partition's outcome.
func (c *cassandraStore) InsertBatch(ctx context.Context, rows []Activity, errs []error) {
	groups := map[uuid.UUID][]int{}
	for i, a := range rows {
		k := c.partition(a)
		groups[k] = append(groups[k], i)
	}
	var wg sync.WaitGroup
	for _, idx := range groups {
		wg.Go(func() {
			var err error
			if len(idx) == 1 {
				err = c.Insert(ctx, rows[idx[0]])
			} else {
				b := c.s.Batch(gocql.UnloggedBatch)
				for _, i := range idx {
					b.Query(c.insert, c.values(rows[i])...)
				}
				if err = b.ExecContext(ctx); err != nil {
					err = fmt.Errorf("%w: cassandra: batch of %d: %w", ErrUnavailable, len(idx), err)
				}
			}
			for _, i := range idx {
				errs[i] = err
			}
		})
	}
	wg.Wait()
}

func (c *cassandraStore) Recent(ctx context.Context, user uuid.UUID, limit int) ([]Activity, error) {
	if c.recent == "" {
		return nil, fmt.Errorf("%w: the report's Cassandra table (PRIMARY KEY ((id))) cannot be read by user: run the service with --schema ours", ErrNoHistory)
	}
	it := c.s.Query(c.recent, gocql.UUID(user), limit).IterContext(ctx)
	out := make([]Activity, 0, limit)
	var (
		id   gocql.UUID
		ts   time.Time
		data string
	)
	for it.Scan(&id, &ts, &data) {
		out = append(out, Activity{ID: uuid.UUID(id), UserID: user, Time: ts.UTC(), Data: json.RawMessage(data)})
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("%w: cassandra: %w", ErrUnavailable, err)
	}
	return out, nil
}

func (c *cassandraStore) Ping(ctx context.Context) error {
	var v string
	if err := c.s.Query("SELECT release_version FROM system.local").Consistency(gocql.One).ScanContext(ctx, &v); err != nil {
		return fmt.Errorf("%w: cassandra: %w", ErrUnavailable, err)
	}
	return nil
}

// Close closes the session (cqlsession.Close).
func (c *cassandraStore) Close() { cqlsession.Close(c.s) }
