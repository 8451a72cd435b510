package nosqlexp

import (
	"context"
	"fmt"
	"github.com/highload-lab/hlab/internal/cqlsession"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/activities"
)

// table is where one service writes: a Postgres database or a Cassandra
// keyspace, holding activities.Table.
type table struct {
	name     string
	count    func(ctx context.Context) (int64, error)
	truncate func(ctx context.Context) error
}

// service is one running "hlab serve activities" and its table.
type service struct {
	svc *lab.Service
	tab table
	db  func() *sandbox.Process // the database's process
	// external: the database is a server the lab did not start (no
	// process of ours to sample).
	external bool
}

// startServices starts the services of serviceSpecs, each on a table of
// its own, and the lab's connections that count and truncate those
// tables (outside the quotas).
func (b *bench) startServices(ctx context.Context) error {
	if err := b.openSessions(); err != nil {
		return err
	}
	for _, sp := range serviceSpecs {
		cfg, s := sp.cfg, &service{}
		var err error
		if sp.db == dbPG {
			err = b.postgresTable(ctx, sp, &cfg, s)
		} else {
			b.cassandraTable(sp, &cfg, s)
		}
		if err != nil {
			return err
		}
		if sp.firstClaim {
			b.heldToSetup(cfg)
		}
		b.run.Progress.Step("start hlab serve activities: "+sp.key, 2*time.Second)
		svc, err := b.run.StartCommand(ctx, "activities", appCPU, appMemMB(sp), cfg.Command())
		if err != nil {
			return err
		}
		b.run.Cleanup(func() { svc.Stop() })
		s.svc = svc
		b.services[sp.key] = s
	}
	return nil
}

// heldToSetup holds what a first-claim service runs with to the Spec's
// setup: the statements it creates its table with and writes with, and
// its client's settings.
func (b *bench) heldToSetup(cfg activities.Config) {
	run := b.run
	if cfg.Store == activities.Postgres {
		run.UsedInFirstClaim(itemPGTable, cfg.PostgresTable())
		run.UsedInFirstClaim(itemPGInsert, cfg.PostgresInsert())
		run.UsedInFirstClaim(itemPGClient, cfg.PostgresClient())
		return
	}
	run.UsedInFirstClaim(itemCasTable, cfg.CassandraTable())
	run.UsedInFirstClaim(itemCasInsert, cfg.CassandraInsert())
	if !b.cas[dbCasPerio].External() {
		// An external server's keyspaces are named after the run, so
		// that it keeps its own, and its login is its own (the run notes
		// that it is not the report's node).
		run.UsedInFirstClaim(itemCasKeyspace, cfg.CassandraKeyspace())
		run.UsedInFirstClaim(itemCasClient, cfg.CassandraClient())
	}
}

// openSessions opens the lab's session to each Cassandra node, reading
// and truncating at consistency ALL.
func (b *bench) openSessions() error {
	for name, c := range b.cas {
		cl := c.NewCluster()
		cl.Timeout = 2 * time.Minute // a full-table COUNT(*) on one throttled core
		cl.Consistency = gocql.All
		session, err := cl.CreateSession()
		if err != nil {
			return fmt.Errorf("nosql: the lab's session to %s: %w", name, err)
		}
		b.run.Cleanup(func() { cqlsession.Close(session) })
		b.sessions[name] = session
	}
	return nil
}

// postgresTable creates sp's Postgres database, points cfg at it, and
// gives s the lab's connection to count and truncate it.
func (b *bench) postgresTable(ctx context.Context, sp serviceSpec, cfg *activities.Config, s *service) error {
	pg := b.pg
	if err := pg.CreateDatabase(ctx, sp.table); err != nil {
		return err
	}
	cfg.Store, cfg.DSN = activities.Postgres, pg.ServiceDSN(sp.table)
	conn, err := pgx.Connect(ctx, pg.DSN(sp.table))
	if err != nil {
		return fmt.Errorf("nosql: %w", err)
	}
	b.run.Cleanup(func() { conn.Close(context.Background()) })
	s.db, s.external = pg.Proc, pg.External()
	s.tab = table{
		name: "postgres database " + sp.table,
		count: func(ctx context.Context) (n int64, err error) {
			err = conn.QueryRow(ctx, "SELECT count(*) FROM "+activities.Table).Scan(&n)
			return n, err
		},
		truncate: func(ctx context.Context) error {
			_, err := conn.Exec(ctx, "TRUNCATE "+activities.Table)
			return err
		},
	}
	return nil
}

// cassandraTable points cfg at sp's keyspace on its node and gives s the
// lab's session to count and truncate it.
func (b *bench) cassandraTable(sp serviceSpec, cfg *activities.Config, s *service) {
	c, session := b.cas[sp.db], b.sessions[sp.db]
	keyspace := c.Keyspace(sp.table)
	cfg.Store, cfg.Cassandra, cfg.Keyspace, cfg.Consistency = activities.Cassandra, c.Addr, keyspace, activities.DefaultConsistency
	cfg.CassandraUser, cfg.CassandraPassword = c.User, c.Password
	qualified := keyspace + "." + activities.Table
	s.db, s.external = c.Proc, c.External()
	s.tab = table{
		name: sp.db + " table " + qualified,
		count: func(ctx context.Context) (n int64, err error) {
			err = session.Query("SELECT COUNT(*) FROM "+qualified).ScanContext(ctx, &n)
			return n, err
		},
		truncate: func(ctx context.Context) error {
			return session.Query("TRUNCATE " + qualified).ExecContext(ctx)
		},
	}
}
