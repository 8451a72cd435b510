package activities

import (
	"context"
	"encoding/json"
	"fmt"
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

// cassandraStore keeps activities in Cassandra, in a table partitioned by
// user and clustered newest first: a user's history is one partition,
// read in order.
type cassandraStore struct {
	s                   *gocql.Session
	cons                gocql.Consistency
	insert, recent, key string
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
	// A node that went down is tried again every second (the driver's
	// default is a minute), so the service recovers soon after it returns.
	cl.ReconnectInterval = time.Second
	cl.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 10, Interval: time.Second}
	s, err := cl.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("%w: cassandra at %s: %w", ErrUnavailable, cfg.Cassandra, err)
	}
	cs := &cassandraStore{
		s: s, cons: cons,
		insert: fmt.Sprintf("INSERT INTO %s.%s (user_id, ts, id, data) VALUES (?, ?, ?, ?)", cfg.Keyspace, Table),
		recent: fmt.Sprintf("SELECT id, ts, data FROM %s.%s WHERE user_id = ? LIMIT ?", cfg.Keyspace, Table),
		key:    cfg.Keyspace,
	}
	if err := cs.migrate(ctx, cfg); err != nil {
		s.Close()
		return nil, err
	}
	return cs, nil
}

// migrate creates the keyspace and table when missing. Schema changes
// take a second or more each; existing ones cost nothing.
func (c *cassandraStore) migrate(ctx context.Context, cfg Config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, q := range []string{
		fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}", cfg.Keyspace, cfg.ReplicationFactor),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	user_id uuid,
	ts      timestamp,
	id      uuid,
	data    text,
	PRIMARY KEY ((user_id), ts, id)
) WITH CLUSTERING ORDER BY (ts DESC, id ASC)`, cfg.Keyspace, Table),
	} {
		// Schema changes go at consistency ONE whatever the service's: they
		// are not data, and QUORUM of a keyspace being created means nothing.
		if err := c.s.Query(q).Consistency(gocql.One).ExecContext(ctx); err != nil {
			return fmt.Errorf("%w: cassandra: creating the schema: %w", ErrUnavailable, err)
		}
	}
	if err := c.s.AwaitSchemaAgreement(ctx); err != nil {
		return fmt.Errorf("%w: cassandra: schema agreement: %w", ErrUnavailable, err)
	}
	return nil
}

func (c *cassandraStore) Kind() string { return "cassandra (" + c.cons.String() + ")" }

func (c *cassandraStore) Insert(ctx context.Context, a Activity) error {
	err := c.s.Query(c.insert, gocql.UUID(a.UserID), a.Time, gocql.UUID(a.ID), string(a.Data)).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("%w: cassandra: %w", ErrUnavailable, err)
	}
	return nil
}

// InsertBatch writes rows as one unlogged batch per partition (user),
// all partitions at once: a batch is atomic and cheap only within one
// partition, and a batch across partitions would make one coordinator do
// the work of many. Each row gets its own partition's outcome.
func (c *cassandraStore) InsertBatch(ctx context.Context, rows []Activity, errs []error) {
	groups := map[uuid.UUID][]int{}
	for i, a := range rows {
		groups[a.UserID] = append(groups[a.UserID], i)
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
					a := rows[i]
					b.Query(c.insert, gocql.UUID(a.UserID), a.Time, gocql.UUID(a.ID), string(a.Data))
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

// Close closes the session, giving up after 5 s: gocql v2.1.2's
// Session.Close can deadlock when the control connection is reconnecting
// at that moment (Close stops the schema refresher the reconnect then
// waits for; seen here after the node was frozen), and a service that
// shuts down must not hang on it.
func (c *cassandraStore) Close() {
	done := make(chan struct{})
	go func() { c.s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}
