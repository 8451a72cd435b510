package nosqlexp

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
)

// cassandraNodes are the Cassandra nodes the lab starts: the report's
// (periodic commit log) and the durable one.
var cassandraNodes = []string{dbCasPerio, dbCas}

// reportPGSettings put back the settings of the report's postgres image
// that the lab's cluster changes from Postgres' defaults (it sets them for
// logical replication and many connections, which nothing here needs).
var reportPGSettings = map[string]string{
	"wal_level": "replica", "max_connections": "100", "max_replication_slots": "10", "max_wal_senders": "10",
}

// startPostgres starts Postgres 14, the report's, durable, with the
// report's image's settings, at 1 CPU and 2000 MB like the report's
// container, and records its settings; its log is kept in the
// experiment's logs when it stops. All Postgres rows run on it, ours too:
// the report's rows are the claim, and ours differ from them only where
// named.
func (b *bench) startPostgres(ctx context.Context) error {
	b.run.Progress.Step("postgres: start", 3*time.Second)
	pg, err := b.run.Postgres(ctx, deps.PostgresConfig{Major: 14, Durable: true, CPU: dbCPU, MemoryMB: pgMemMB, Settings: reportPGSettings})
	if err != nil {
		return err
	}
	b.run.Cleanup(func() {
		if !pg.External() {
			keepLog(filepath.Join(pg.Dir, "postgres.log"), filepath.Join(b.dir, "postgres.log"))
		}
		pg.Stop()
	})
	b.pg = pg
	b.run.SetEnv("postgres", fmt.Sprintf("%s, %.0f CPU (quota), %d MB, durable", pg.Kind, dbCPU, pgMemMB))
	b.run.SetEnv("postgres_settings", pg.SettingsLine())
	if !pg.External() {
		b.run.UsedInFirstClaim(itemPGVersion, pg.Version)
		b.run.UsedInFirstClaim(itemPGSettings, pg.SettingsLine())
	}
	return nil
}

// startCassandra starts the durable node (ours) and the report's
// (Cassandra 4.0, authenticating, its commit log periodic), at once
// (starting is not measured), or connects to the external one that
// stands for both.
func (b *bench) startCassandra(ctx context.Context) error {
	b.run.Progress.Step(fmt.Sprintf("cassandra: start %d node(s) (the JVM takes 10-30 s)", len(cassandraNodes)), 20*time.Second)
	if b.run.Opts.ExternalFor(lab.DepCassandra) {
		return b.externalCassandra(ctx)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, name := range cassandraNodes {
		wg.Go(func() {
			// The report's node is Cassandra 4.0, authenticates and holds
			// 256 vnodes (the bitnami 4.0 image's defaults); ours is the
			// current Cassandra, one token, no login.
			cfg := deps.CassandraConfig{Durable: name == dbCas, JVMConfig: deps.JVMConfig{CPU: dbCPU, HeapMB: heapMB}}
			if name == dbCasPerio {
				cfg.Version, cfg.PasswordAuth, cfg.Tokens = deps.Cassandra40Version, true, reportTokens
			}
			c, err := b.run.Cassandra(ctx, cfg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = cmp.Or(first, fmt.Errorf("nosql: %s: %w", name, err))
				return
			}
			b.cas[name] = c
			b.run.Cleanup(func() {
				keepLog(filepath.Join(c.Dir, "system.log"), filepath.Join(b.dir, name+"-system.log"))
				c.Stop()
			})
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	b.recordCassandra()
	st := b.cas[dbCasPerio].Settings
	b.run.UsedInFirstClaim(itemCasAuth, "authenticator: "+st["authenticator"]+", authorizer: "+st["authorizer"])
	b.run.UsedInFirstClaim(itemCasCommitlog, "commitlog_sync: "+st["commitlog_sync"]+", commitlog_sync_period_in_ms: "+st["commitlog_sync_period_in_ms"])
	b.run.UsedInFirstClaim(itemCasVersion, b.cas[dbCasPerio].Version)
	b.run.UsedInFirstClaim(itemCasTokens, "num_tokens: "+st["num_tokens"])
	return nil
}

// externalCassandra connects to the one cluster the lab does not
// configure: both rows' "nodes" are it, each service on a keyspace of its
// own.
func (b *bench) externalCassandra(ctx context.Context) error {
	c, err := b.run.Cassandra(ctx, deps.CassandraConfig{})
	if err != nil {
		return err
	}
	b.run.Cleanup(func() { c.Stop() })
	for _, name := range cassandraNodes {
		b.cas[name] = c
		b.run.SetEnv(name, c.Kind)
		b.run.SetEnv(name+"_settings", settings(c.Settings)+" (read from the node's system_views.settings; the lab does not set them)")
	}
	commitlog := orUnknown(c.Settings["commitlog_sync"])
	b.run.Note("Cassandra is an external server: the rows named \"periodic commit log\" and \"durable commit log\" both run on its own commit log setting (%s), which the lab does not change; its CPU is not measured", commitlog)
	b.run.SetEnv("durability", fmt.Sprintf("postgres fsync=%s, synchronous_commit=%s; cassandra (external): commitlog_sync=%s for every row",
		orUnknown(b.pg.Settings["fsync"]), orUnknown(b.pg.Settings["synchronous_commit"]), commitlog))
	return nil
}

// recordCassandra records the nodes the lab started: version, JVM,
// quota, start time and memory, settings, and each side's durability.
func (b *bench) recordCassandra() {
	java := "java"
	if _, v, err := deps.FindJava(); err == nil {
		java += " " + v
	}
	for _, name := range cassandraNodes {
		c := b.cas[name]
		rss := "?"
		if p := c.Proc(); p != nil {
			if s := p.Samples(); len(s) > 0 {
				rss = fmt.Sprintf("%.0f MB", s[len(s)-1].RSSMB)
			}
		}
		b.run.SetEnv(name, fmt.Sprintf("%s on %s (Maven Central jars, JVM flags of its jvm17-server.options), %.0f CPU (quota), -Xms/-Xmx %dm, no memory limit; started in %.1f s, RSS %s after start",
			c.Kind, java, dbCPU, c.HeapMB, c.Started.Seconds(), rss))
		b.run.SetEnv(name+"_settings", settings(c.Settings)+"; single node, others at their defaults")
	}
	b.run.SetEnv("durability", fmt.Sprintf("postgres fsync=%s, synchronous_commit=%s (durable: its default, and the report's); cassandra: the report's node commitlog_sync=%s (its default: a write is acknowledged before its fsync), the durable node commitlog_sync=%s (a write waits for the sync, concurrent writes sharing one)",
		b.pg.Settings["fsync"], b.pg.Settings["synchronous_commit"], b.cas[dbCasPerio].Settings["commitlog_sync"], b.cas[dbCas].Settings["commitlog_sync"]))
}

func orUnknown(s string) string { return cmp.Or(s, "unknown") }

// settings renders a Cassandra node's settings for the environment,
// "name=value" in name order.
func settings(s map[string]string) string {
	var parts []string
	for k, v := range s {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// keepLog copies a database's log into the lab's log directory before the
// database's temporary directory goes (best effort).
func keepLog(from, to string) {
	src, err := os.Open(from)
	if err != nil {
		return
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return
	}
	defer dst.Close()
	io.Copy(dst, src)
}
