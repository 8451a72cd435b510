package deps

import (
	"context"
	"errors"
	"fmt"
	"github.com/highload-lab/hlab/internal/cqlsession"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrExternal is returned by StopServer and StartServer of a server that
// ConnectPostgres or ConnectCassandra found running: the lab does not
// control it, so it never stops, restarts or kills it.
var ErrExternal = errors.New("deps: the lab does not control an external server")

// ExternalQuotas is said of every external server in a run's environment:
// the sandbox's CPU and memory quotas apply only to what it starts.
const ExternalQuotas = "quotas not controlled by the lab"

// cleanupTimeout bounds the removal of what a run made on an external
// server; it runs on a fresh context, also after the run was interrupted.
const cleanupTimeout = 30 * time.Second

// prefixName is how every object a run makes on an external server is
// named: "hlab_" then letters, digits and _, so that it is a valid
// Postgres, Cassandra and Kafka name, and cleanup can find it.
var prefixName = regexp.MustCompile(`^hlab_[a-z0-9_]+$`)

// RedactURL returns rawURL with its password (in the user info or a
// password= parameter) replaced by ***, for logs and reports.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(an unparsable URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "***")
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "***")
		u.RawQuery = q.Encode()
	}
	return strings.ReplaceAll(u.String(), "%2A%2A%2A", "***")
}

// ParsePostgresURL checks that rawURL is a postgres:// or postgresql://
// URL with a host, and returns it parsed.
func ParsePostgresURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return nil, fmt.Errorf("deps: %q is not a Postgres URL: give postgres://USER:PASSWORD@HOST:PORT/DATABASE (the database is the one the lab connects to to create its own)", RedactURL(rawURL))
	}
	return u, nil
}

// ConnectPostgres returns a handle on the Postgres server at rawURL,
// which the lab does not control: StopServer and StartServer return
// ErrExternal, Proc is nil, and Stop drops what the run made there
// instead of stopping the server. Every database CreateDatabase makes,
// and every name Unique gives, starts with prefix ("hlab_crud_3f9a1c_"),
// unique to the run, so that two runs on one server do not collide; Stop
// drops the replication slots and databases whose names start with it.
// The user of rawURL must be allowed to create databases (CREATEDB) and,
// for logical replication, replication slots (REPLICATION).
func ConnectPostgres(ctx context.Context, rawURL, prefix string) (*Postgres, error) {
	u, err := ParsePostgresURL(rawURL)
	if err != nil {
		return nil, err
	}
	if !prefixName.MatchString(prefix) {
		return nil, fmt.Errorf("deps: external postgres: prefix %q: want hlab_ then lower-case letters, digits and _", prefix)
	}
	p := &Postgres{external: u, prefix: prefix, Addr: u.Host, Settings: map[string]string{}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN(""))
	if err != nil {
		return nil, fmt.Errorf("deps: cannot connect to the Postgres server at %s: %w (check that it runs and that the URL's host, port, user, password and database are right; --postgres names it)", RedactURL(rawURL), err)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return nil, fmt.Errorf("deps: external postgres %s: its version: %w", RedactURL(rawURL), err)
	}
	p.Version = strings.Fields(version)[0]
	for _, name := range []string{"wal_level", "fsync", "synchronous_commit", "full_page_writes", "max_connections", "max_replication_slots", "shared_buffers"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err == nil {
			p.Settings[name] = v
		}
	}
	p.Kind = fmt.Sprintf("external %s (%s), %s", RedactURL(rawURL), p.Version, ExternalQuotas)
	return p, nil
}

// External reports whether the server is one the lab did not start.
func (p *Postgres) External() bool { return p.external != nil }

// Unique returns name made unique to the run on an external server (its
// prefix before it), name itself on one the lab started: for replication
// slots and other names the server shares between databases.
func (p *Postgres) Unique(name string) string {
	if p.external == nil {
		return name
	}
	return p.prefix + name
}

// RequireLogical returns an error saying what to do when the server
// cannot do logical replication (wal_level is not logical).
func (p *Postgres) RequireLogical() error {
	if p.Settings["wal_level"] == "logical" {
		return nil
	}
	return fmt.Errorf("deps: the Postgres server at %s has wal_level=%s; change data capture needs logical replication: set wal_level = logical in its postgresql.conf (ALTER SYSTEM SET wal_level = logical) and restart it", p.Addr, p.Settings["wal_level"])
}

// externalDSN is the URL of database db on the external server: "" is
// the URL's own database (the maintenance one), any other name the run's
// own (prefixed).
func (p *Postgres) externalDSN(db string) string {
	u := *p.external
	if db != "" {
		u.Path = "/" + p.prefix + db
	}
	return u.String()
}

// cleanup drops the replication slots and databases whose names start
// with p's prefix, on a fresh context: it also runs once the run's was
// cancelled.
func (p *Postgres) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN(""))
	if err != nil {
		return fmt.Errorf("deps: external postgres %s: cleanup: %w", p.Addr, err)
	}
	defer conn.Close(ctx)
	mine := func(col string) string { return "left(" + col + ", length($1)) = $1" }
	var errs []error
	// Slots first: a database with a logical slot cannot be dropped. An
	// active one is released by ending the backend that holds it.
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE active_pid IS NOT NULL AND (`+mine("slot_name")+` OR `+mine("database")+`)`, p.prefix); err != nil {
		errs = append(errs, err)
	}
	rows, err := conn.Query(ctx, `SELECT slot_name FROM pg_replication_slots WHERE `+mine("slot_name")+` OR `+mine("database"), p.prefix)
	if err == nil {
		slots, err := pgx.CollectRows(rows, pgx.RowTo[string])
		errs = append(errs, err)
		for _, s := range slots {
			if err := dropSlot(ctx, conn, s); err != nil {
				errs = append(errs, fmt.Errorf("slot %s: %w", s, err))
			}
		}
	} else {
		errs = append(errs, err)
	}
	rows, err = conn.Query(ctx, `SELECT datname FROM pg_database WHERE `+mine("datname"), p.prefix)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	errs = append(errs, err)
	for _, db := range dbs {
		conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()); err != nil {
			errs = append(errs, fmt.Errorf("database %s: %w", db, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deps: external postgres %s: cleanup of %s*: %w", p.Addr, p.prefix, err)
	}
	return nil
}

// dropSlot drops a slot, waiting a little for a backend ended a moment
// ago to release it.
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	var err error
	for range 50 {
		if _, err = conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// ConnectCassandra returns a handle on the Cassandra node at addr
// (host:port; 9042 when the port is left out), which the lab does not
// control: StopServer and StartServer return ErrExternal, Proc is nil,
// and Stop drops the keyspaces whose names start with prefix (those
// Keyspace gave) instead of stopping the node.
func ConnectCassandra(ctx context.Context, addr, prefix string) (*Cassandra, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "9042")
	}
	if !prefixName.MatchString(prefix) {
		return nil, fmt.Errorf("deps: external cassandra: prefix %q: want hlab_ then lower-case letters, digits and _", prefix)
	}
	c := &Cassandra{Addr: addr, prefix: prefix, external: true, Settings: map[string]string{}}
	s, err := c.adminSession()
	if err != nil {
		return nil, fmt.Errorf("deps: cannot connect to the Cassandra node at %s: %w (check that it runs and that --cassandra gives its CQL native transport address, host:port)", addr, err)
	}
	defer cqlsession.Close(s)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&c.Version); err != nil {
		return nil, fmt.Errorf("deps: external cassandra %s: its version: %w", addr, err)
	}
	// Cassandra 4 and later show their settings in a virtual table.
	for _, name := range []string{"commitlog_sync", "commitlog_sync_period", "commitlog_sync_period_in_ms"} {
		var v string
		if err := s.Query("SELECT value FROM system_views.settings WHERE name = ?", name).WithContext(ctx).Scan(&v); err == nil && v != "" {
			c.Settings[name] = v
		}
	}
	c.Kind = fmt.Sprintf("external cassandra %s (%s), %s", addr, c.Version, ExternalQuotas)
	return c, nil
}

func (c *Cassandra) adminSession() (*gocql.Session, error) {
	cl := gocql.NewCluster(c.Addr)
	cl.ConnectTimeout, cl.Timeout = 5*time.Second, 30*time.Second
	cl.NumConns = 1
	cl.DisableInitialHostLookup = true
	return cl.CreateSession()
}

// External reports whether the node is one the lab did not start.
func (c *Cassandra) External() bool { return c.external }

// Keyspace returns name made unique to the run on an external node (its
// prefix before it), name itself on one the lab started. Stop drops the
// keyspaces it named on an external node.
func (c *Cassandra) Keyspace(name string) string {
	if !c.external {
		return name
	}
	return c.prefix + name
}

// cleanup drops the keyspaces whose names start with c's prefix.
func (c *Cassandra) cleanup() error {
	s, err := c.adminSession()
	if err != nil {
		return fmt.Errorf("deps: external cassandra %s: cleanup: %w", c.Addr, err)
	}
	defer cqlsession.Close(s)
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	iter := s.Query("SELECT keyspace_name FROM system_schema.keyspaces").WithContext(ctx).Iter()
	var ks string
	var mine []string
	for iter.Scan(&ks) {
		if strings.HasPrefix(ks, c.prefix) {
			mine = append(mine, ks)
		}
	}
	errs = append(errs, iter.Close())
	for _, ks := range mine {
		if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(ctx).Exec(); err != nil {
			errs = append(errs, fmt.Errorf("keyspace %s: %w", ks, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deps: external cassandra %s: cleanup of %s*: %w", c.Addr, c.prefix, err)
	}
	return nil
}

// ExternalKafka describes the Kafka brokers at brokers, which the lab
// does not control: their version as the first broker's API versions
// suggest it (kadm's guess, "v3.7"), and how many brokers the cluster
// has. opts secure the connection (kafkasec: TLS, SASL).
func ExternalKafka(ctx context.Context, brokers []string, opts ...kgo.Opt) (version string, n int, err error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DialTimeout(5 * time.Second), kgo.RequestRetries(1)}, opts...)...)
	if err != nil {
		return "", 0, fmt.Errorf("deps: kafka brokers %s: %w", strings.Join(brokers, ","), err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("deps: cannot reach the Kafka brokers %s: %w (check that they run and that --kafka-brokers gives their host:port, comma-separated)", strings.Join(brokers, ","), err)
	}
	version = "version unknown"
	if vs, err := adm.ApiVersions(ctx); err == nil {
		for _, v := range vs.Sorted() {
			if v.Err == nil {
				version = strings.TrimPrefix(v.VersionGuess(), "at least ")
				break
			}
		}
	}
	return version, len(meta.Brokers), nil
}

// CleanupKafka deletes the topics and consumer groups on brokers whose
// names start with prefix, on a fresh context; opts secure the
// connection.
func CleanupKafka(brokers []string, prefix string, opts ...kgo.Opt) error {
	if !prefixName.MatchString(prefix) {
		return fmt.Errorf("deps: kafka cleanup: prefix %q: want hlab_ then lower-case letters, digits and _", prefix)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DialTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	var errs []error
	if groups, err := adm.ListGroups(ctx); err == nil {
		var mine []string
		for _, g := range groups.Groups() {
			if strings.HasPrefix(g, prefix) {
				mine = append(mine, g)
			}
		}
		if len(mine) > 0 {
			res, err := adm.DeleteGroups(ctx, mine...)
			errs = append(errs, err)
			for _, r := range res {
				if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
					errs = append(errs, fmt.Errorf("group %s: %w", r.Group, r.Err))
				}
			}
		}
	} else {
		errs = append(errs, err)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	var mine []string
	for _, t := range topics.Names() {
		if strings.HasPrefix(t, prefix) {
			mine = append(mine, t)
		}
	}
	if len(mine) > 0 {
		res, err := adm.DeleteTopics(ctx, mine...)
		errs = append(errs, err)
		for _, r := range res {
			if r.Err != nil {
				errs = append(errs, fmt.Errorf("topic %s: %w", r.Topic, r.Err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deps: kafka %s: cleanup of %s*: %w", strings.Join(brokers, ","), prefix, err)
	}
	return nil
}
