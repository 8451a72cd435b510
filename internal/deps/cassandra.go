package deps

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/highload-lab/hlab/internal/cqlsession"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// CassandraConfig is what StartCassandra needs. The zero value starts a
// throwaway node with Cassandra's default commit log (periodic).
type CassandraConfig struct {
	// Dir holds cassandra.yaml, logback.xml, the logs (system.log,
	// stdout.log) and the data (data/, commitlog/, ...). "" = a temporary
	// directory that Stop removes.
	Dir string
	// Durable makes the node acknowledge a write only once its commit log
	// is fsynced (commitlog_sync: batch), like Postgres with fsync and
	// synchronous_commit on. Off (the default) is Cassandra's own default,
	// commitlog_sync: periodic with a 10 s period: a write is acknowledged
	// once it is in the commit log's memory-mapped segment, and synced to
	// disk within 10 s. Experiments that compare databases set it and
	// record Settings.
	Durable bool
	// Settings are extra cassandra.yaml settings (key -> one-line YAML
	// value), applied last.
	Settings map[string]string
	// JVMConfig: the heap defaults to 1024 MB (-Xms too); StartTimeout
	// bounds the wait for the first CQL connection (also after
	// StartServer), 0 = 3 min: the JVM takes 10-30 s on 2 busy cores, more
	// under a CPU quota.
	JVMConfig
	// Version is the Cassandra to run: CassandraVersion ("", the default)
	// or Cassandra40Version.
	Version string
	// Tokens is the node's share of the ring as vnodes (num_tokens); 0 =
	// one token at 0, the whole ring in one range.
	Tokens int
	// PasswordAuth makes the node authenticate and authorize its clients
	// (authenticator: PasswordAuthenticator, authorizer:
	// CassandraAuthorizer, the bitnami image's defaults): clients log in
	// as the superuser Cassandra creates at its first start,
	// cassandra/cassandra (Cassandra.User, Password), which NewCluster
	// and Session do. Off (the default), anyone connects.
	PasswordAuth bool
	// Keep starts the node on the data already in Dir (a previous run's)
	// instead of emptying it first: a standalone node's keyspaces outlive
	// a restart (hlab deps up/down). Needs Dir; Stop never removes a given
	// Dir.
	Keep bool
	// Port is the CQL port to listen on; 0 = a free one. The storage and
	// JMX ports are free ones either way.
	Port int
}

// Cassandra is a running single-node Cassandra on 127.0.0.1 (the JVM
// from Maven Central's jars). Its methods are safe for concurrent use.
type Cassandra struct {
	Kind    string // "cassandra <version>", for a run's environment record
	Version string // CassandraConfig.Version
	Addr    string // 127.0.0.1:port of the CQL native transport
	Dir     string
	HeapMB  int
	// Settings are the cassandra.yaml settings chosen by the config
	// (commitlog_sync and its period among them), for a run's
	// environment record.
	Settings map[string]string
	// Started is how long the first start took, JVM start to the first
	// CQL answer.
	Started time.Duration
	// User and Password log in to a node started with PasswordAuth (its
	// default superuser); empty otherwise.
	User, Password string

	node *serverNode
	// external is set for a node the lab did not start
	// (ConnectCassandra), prefix what the run's keyspaces start with.
	external bool
	prefix   string
}

const cassandraTempPrefix = "hlab-cassandra-"

// StartCassandra fetches the jars if needed, writes the node's
// configuration into cfg.Dir and starts the node under sb, returning once
// it answers a CQL query. ctx bounds the wait and the node's life, as
// with sandbox.Start: canceling it stops the node.
func StartCassandra(ctx context.Context, sb *sandbox.Sandbox, cfg CassandraConfig) (*Cassandra, error) {
	if sb == nil {
		return nil, errors.New("deps: StartCassandra needs a sandbox to run the node in")
	}
	version := cmp.Or(cfg.Version, CassandraVersion)
	if version != CassandraVersion && version != Cassandra40Version {
		return nil, fmt.Errorf("deps: cassandra %q: want %s or %s", cfg.Version, CassandraVersion, Cassandra40Version)
	}
	setup, err := CheckCassandra()
	if err != nil {
		return nil, err
	}
	if setup.JavaErr != nil {
		return nil, setup.JavaErr
	}
	lib, err := fetchCassandra(ctx, version, cfg.Log)
	if err != nil {
		return nil, err
	}
	defaults.Positive(&cfg.StartTimeout, 3*time.Minute)
	heap := cfg.heap(1024)
	// SIGTERM: Cassandra drains and flushes, which takes a while.
	node, err := newServerNode(ctx, sb, "cassandra", cfg.Dir, cassandraTempPrefix, cassandraStorage, cfg.Keep, 30*time.Second, ErrCassandraStopped)
	if err != nil {
		return nil, err
	}
	c := &Cassandra{Kind: "cassandra " + version, Version: version, HeapMB: heap, Dir: node.dir, node: node}
	node.log = "system.log"
	if cfg.PasswordAuth {
		c.User, c.Password = "cassandra", "cassandra"
	}
	node.await = func(ctx context.Context, exited <-chan struct{}) error {
		return awaitCassandra(ctx, c.Addr, c.authenticator(), cfg.StartTimeout, exited)
	}
	ok := false
	defer func() {
		if !ok {
			node.removeDir()
		}
	}()
	if err := os.MkdirAll(filepath.Join(c.Dir, "triggers"), 0o755); err != nil {
		return nil, fmt.Errorf("deps: cassandra dir: %w", err)
	}

	c.Settings = map[string]string{
		"commitlog_sync":        "periodic",
		"commitlog_sync_period": "10000ms",
		// Tests and the lab truncate tables between runs: a snapshot of
		// each would only fill the disk.
		"auto_snapshot": "false",
		// A full-table COUNT(*), how the lab checks what was stored, is a
		// range read: give it time on one throttled core.
		"range_request_timeout":      "60000ms",
		"authenticator":              "AllowAllAuthenticator",
		"authorizer":                 "AllowAllAuthorizer",
		"storage_compatibility_mode": "NONE",
		"num_tokens":                 "1",
		"initial_token":              "0",
	}
	if cfg.Tokens > 1 {
		// The ring in vnodes, each placed at random: a lone node owns
		// them all either way.
		c.Settings["num_tokens"] = strconv.Itoa(cfg.Tokens)
		delete(c.Settings, "initial_token")
	}
	jvm := cassandraJVM
	if version == Cassandra40Version {
		// 4.0 knows its durations by their older names, and has no
		// storage compatibility to choose.
		c.Settings["commitlog_sync_period_in_ms"], c.Settings["range_request_timeout_in_ms"] = "10000", "60000"
		delete(c.Settings, "commitlog_sync_period")
		delete(c.Settings, "range_request_timeout")
		delete(c.Settings, "storage_compatibility_mode")
		jvm = slices.Concat(cassandraJVM, cassandra40JVM)
	}
	if cfg.PasswordAuth {
		c.Settings["authenticator"], c.Settings["authorizer"] = "PasswordAuthenticator", "CassandraAuthorizer"
	}
	if cfg.Durable {
		c.Settings["commitlog_sync"] = "batch"
		delete(c.Settings, "commitlog_sync_period")
		delete(c.Settings, "commitlog_sync_period_in_ms")
	}
	for k, v := range cfg.Settings {
		c.Settings[k] = v
	}

	logbackPath, err := node.writeConf("logback.xml", cassandraLogback, c.Dir)
	if err != nil {
		return nil, err
	}
	yamlPath := filepath.Join(c.Dir, "cassandra.yaml")

	err = onPorts(ctx, cfg.Port, 3, func(ports []int) error {
		native, storage, jmx := ports[0], ports[1], ports[2]
		y, err := RenderCassandraYAML(c.Dir, native, storage, c.Settings)
		if err != nil {
			return err
		}
		if err := os.WriteFile(yamlPath, y, 0o644); err != nil {
			return fmt.Errorf("deps: cassandra config: %w", err)
		}
		args := []string{"-Xms" + strconv.Itoa(heap) + "m", "-Xmx" + strconv.Itoa(heap) + "m"}
		args = append(args, jvm...)
		args = append(args,
			"-javaagent:"+filepath.Join(lib, jammJar(lib)),
			"-Dcassandra.config=file://"+yamlPath,
			"-Dlogback.configurationFile="+logbackPath,
			"-Dcassandra.logdir="+c.Dir,
			"-Dcassandra.triggers_dir="+filepath.Join(c.Dir, "triggers"),
			"-Dcassandra-foreground=yes",
			"-Dcassandra.skip_wait_for_gossip_to_settle=0",
			"-Dcassandra.superuser_setup_delay_ms=0",
			"-Dcassandra.jmx.local.port="+strconv.Itoa(jmx),
			"-cp", filepath.Join(lib, "*"), // the JVM expands a trailing * to every jar
			"org.apache.cassandra.service.CassandraDaemon",
		)
		node.spec = sandbox.Spec{
			Name: "cassandra", Path: setup.Java, Dir: c.Dir, Args: args,
			CPU: cfg.CPU, MemoryMB: cfg.MemoryMB,
		}
		c.Addr = fmt.Sprintf("127.0.0.1:%d", native)
		start := time.Now()
		if err := node.startServer(ctx); err != nil {
			if PortTaken(err) {
				// Another try on new ports needs a new node: this one may
				// have written its identity before it failed to bind.
				node.removeStorage()
			}
			return err
		}
		c.Started = time.Since(start)
		return nil
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// cassandraStorage are the directories of a node's identity and data
// under its Dir: a new node needs them empty.
var cassandraStorage = []string{"data", "commitlog", "hints", "saved_caches", "cdc_raw"}

// jammJar finds the jamm agent among the jars (Cassandra measures object
// sizes with it and needs it as -javaagent).
func jammJar(lib string) string {
	ms, _ := filepath.Glob(filepath.Join(lib, "jamm-*.jar"))
	if len(ms) == 0 {
		return "jamm.jar" // the JVM then says what is missing
	}
	return filepath.Base(ms[0])
}

// awaitCassandra waits until the node at addr answers a query through
// the CQL driver (logging in with auth, when not nil), ctx ends, timeout
// passes, or exited (when non-nil) closes. The native transport opens
// last in Cassandra's start-up, so a CQL answer means the node is ready
// for clients; with PasswordAuth, a login also means its superuser
// exists.
func awaitCassandra(ctx context.Context, addr string, auth gocql.Authenticator, timeout time.Duration, exited <-chan struct{}) error {
	return awaitReady(ctx, "cassandra at "+addr, "did not answer CQL", timeout, 250*time.Millisecond, exited, func(ctx context.Context) error {
		return pingCassandra(ctx, addr, auth)
	})
}

// pingCassandra opens a CQL session to addr and reads the node's version.
func pingCassandra(ctx context.Context, addr string, auth gocql.Authenticator) error {
	cl := gocql.NewCluster(addr)
	cl.Authenticator = auth
	cl.ConnectTimeout, cl.Timeout = 2*time.Second, 5*time.Second
	cl.NumConns = 1
	cl.DisableInitialHostLookup = true
	cl.Metadata.CacheMode = gocql.Disabled
	s, err := cl.CreateSession()
	if err != nil {
		return err
	}
	defer cqlsession.Close(s)
	var v string
	return s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&v)
}

// NewCluster returns a driver configuration for the node: its address,
// its login (PasswordAuth), QUORUM (the driver's default), short
// reconnects (a node restarted by StartServer is found again within a
// second or two), no driver log. Set Keyspace and the rest, then
// CreateSession.
func (c *Cassandra) NewCluster() *gocql.ClusterConfig {
	cl := gocql.NewCluster(c.Addr)
	cl.Authenticator = c.authenticator()
	cl.ConnectTimeout, cl.Timeout = 5*time.Second, 10*time.Second
	cl.ReconnectInterval = time.Second
	cl.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 10, Interval: time.Second}
	return cl
}

// authenticator is the node's login, nil when it takes none.
func (c *Cassandra) authenticator() gocql.Authenticator {
	if c.User == "" {
		return nil
	}
	return gocql.PasswordAuthenticator{Username: c.User, Password: c.Password}
}

// Session opens a session on keyspace ("" = none) of the node.
func (c *Cassandra) Session(keyspace string) (*gocql.Session, error) {
	cl := c.NewCluster()
	cl.Keyspace = keyspace
	s, err := cl.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("deps: cassandra session at %s: %w", c.Addr, err)
	}
	return s, nil
}

// Proc returns the node's current process (a new one after each
// StartServer), nil while it is stopped.
func (c *Cassandra) Proc() *sandbox.Process {
	if c.external {
		return nil
	}
	return c.node.process()
}

// StopServer stops the node (SIGTERM: Cassandra drains and flushes; SIGKILL
// after 30 s) and keeps its data and ports, for tests of what a service
// does while its database is down.
func (c *Cassandra) StopServer() error {
	if c.external {
		return ErrExternal
	}
	return c.node.stopServer()
}

// StartServer starts the node again on its data and ports (after
// StopServer, or after it died) and waits until it answers CQL. It does
// nothing while the node runs.
func (c *Cassandra) StartServer(ctx context.Context) error {
	if c.external {
		return ErrExternal
	}
	return c.node.startServer(ctx)
}

// Stop stops the node for good and removes a temporary Dir. It is
// idempotent. An external node goes on running: Stop drops the keyspaces
// the run made there (those Keyspace named).
func (c *Cassandra) Stop() error {
	if c.external {
		return c.cleanup()
	}
	return c.node.stop(c.node.removeDir)
}
