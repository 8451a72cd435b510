package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/kafkasec"
)

// External names servers the lab runs against instead of starting its
// own (hlab lab --postgres, --kafka-brokers, --cassandra): a team's real
// cluster. The lab does not control them: it never stops, restarts or
// kills them (rows that would are not rerun, and say so), their CPU and
// memory quotas are theirs, and every object a run makes there is named
// hlab_<experiment>_<random>_... and dropped when the experiment ends,
// also when it fails or is interrupted.
type External struct {
	// Postgres is a postgres:// URL; its user creates databases and, for
	// change data capture, replication slots.
	Postgres string
	// KafkaBrokers are host:port seed brokers.
	KafkaBrokers []string
	// KafkaSecurity is how to connect to KafkaBrokers (TLS, SASL); its
	// secrets are in files, whose paths the lab passes on to the
	// processes it starts.
	KafkaSecurity kafkasec.Config
	// Cassandra is the host:port of a node's CQL native transport.
	Cassandra string
}

// Dependencies of experiments, as External and Spec.Needs name them.
const (
	DepPostgres  = "postgres"
	DepKafka     = "kafka"
	DepCassandra = "cassandra"
)

// ExternalReason is why a row that stops, restarts or kills a dependency,
// or changes its settings, is not rerun on an external server.
const ExternalReason = "the lab does not control an external server"

// given returns the dependencies o names an external server for.
func (e External) given() []string {
	var out []string
	if e.Postgres != "" {
		out = append(out, DepPostgres)
	}
	if len(e.KafkaBrokers) > 0 {
		out = append(out, DepKafka)
	}
	if e.Cassandra != "" {
		out = append(out, DepCassandra)
	}
	return out
}

// flag is the command-line flag that gives dep's external server.
func flag(dep string) string {
	return map[string]string{DepPostgres: "--postgres", DepKafka: "--kafka-brokers", DepCassandra: "--cassandra"}[dep]
}

// CheckExternal checks the external servers of o before a run: each is
// well formed, used by some experiment of exps, and answers; a Postgres
// that an experiment needs logical replication from (the replica
// experiment) has wal_level=logical. Its errors say which server and
// what to do.
func CheckExternal(ctx context.Context, exps []Experiment, o Options) error {
	x := o.External
	used := map[string]bool{}
	var names []string
	for _, e := range exps {
		spec := e.Spec(o)
		for _, dep := range spec.Needs {
			used[dep] = true
		}
		names = append(names, spec.Name)
	}
	for _, dep := range x.given() {
		if !used[dep] {
			return fmt.Errorf("%s is unused: none of the experiments selected (%s) uses %s; drop the flag or select one that does", flag(dep), strings.Join(names, ", "), dep)
		}
	}
	if x.Postgres != "" {
		if _, err := deps.ParsePostgresURL(x.Postgres); err != nil {
			return fmt.Errorf("--postgres: %w", err)
		}
	}
	for _, b := range x.KafkaBrokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("--kafka-brokers: %q is not host:port: give the brokers as host:port,host:port", b)
		}
	}
	if x.KafkaSecurity.Enabled() && len(x.KafkaBrokers) == 0 {
		return errors.New("--kafka-tls* and --kafka-sasl* secure the connections to --kafka-brokers: give the brokers too (the Kafka the lab starts takes plaintext)")
	}
	if x.KafkaSecurity.Enabled() {
		for _, e := range exps {
			if spec := e.Spec(o); slices.Contains(spec.Needs, DepKafka) && !spec.SecuredKafka {
				return fmt.Errorf("experiment %s connects to Kafka in plaintext only: run it without --kafka-tls* and --kafka-sasl*, against brokers with a PLAINTEXT listener", spec.Name)
			}
		}
	}
	if len(x.KafkaBrokers) > 0 && o.Kafka == KafkaReal {
		return errors.New("--kafka real and --kafka-brokers exclude each other: the first starts a broker, the second uses yours")
	}
	if x.Postgres != "" {
		pg, err := deps.ConnectPostgres(ctx, x.Postgres, "hlab_check_")
		if err != nil {
			return fmt.Errorf("--postgres: %w", err)
		}
		for _, e := range exps {
			if spec := e.Spec(o); spec.LogicalReplication {
				if err := pg.RequireLogical(); err != nil {
					return fmt.Errorf("--postgres: experiment %s: %w", spec.Name, err)
				}
			}
		}
	}
	if len(x.KafkaBrokers) > 0 {
		opts, err := x.KafkaSecurity.Opts()
		if err == nil && x.KafkaSecurity.Enabled() {
			err = x.KafkaSecurity.Check(ctx, x.KafkaBrokers, 10*time.Second)
		}
		if err == nil {
			_, _, err = deps.ExternalKafka(ctx, x.KafkaBrokers, opts...)
		}
		if err != nil {
			return fmt.Errorf("--kafka-brokers: %w", err)
		}
	}
	if x.Cassandra != "" {
		c, err := deps.ConnectCassandra(ctx, x.Cassandra, "hlab_check_")
		if err != nil {
			return fmt.Errorf("--cassandra: %w", err)
		}
		_ = c // nothing made: nothing to drop
	}
	return nil
}

// newPrefix is what every object the run of experiment name makes on an
// external server is named with: hlab_<name>_<6 random hex digits>_.
func newPrefix(name string) string {
	b := make([]byte, 3)
	rand.Read(b)
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(name))
	return "hlab_" + clean + "_" + hex.EncodeToString(b) + "_"
}

// external records that the run uses an external server for dep: its
// env entry (set again after the experiment ran, so that an experiment's
// own words about a server it started do not stand for it), and its
// cleanup, run when the experiment ends even if it did not stop it.
func (r *Run) external(dep, kind string, cleanup func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.extEnv[dep] = kind
	r.cleanups = append(r.cleanups, cleanup)
}

// finishExternal runs the cleanups of the run's external servers and
// records them in the environment.
func (r *Run) finishExternal() {
	r.mu.Lock()
	cleanups, env := r.cleanups, r.extEnv
	r.cleanups = nil
	r.mu.Unlock()
	for _, c := range slices.Backward(cleanups) {
		if err := c(); err != nil {
			r.Note("cleanup on an external server failed: %v; drop what is left by hand (its names start with %s)", err, r.prefix)
		}
	}
	for dep, kind := range env {
		r.res.Env[dep] = kind
	}
	if len(env) > 0 {
		r.res.Env["external"] = fmt.Sprintf("the lab did not start these servers and did not control their CPU/memory quotas; what it made there was named %s* and dropped at the end", r.prefix)
	}
}

// Postgres returns the Postgres the experiment runs against: the one
// Opts.External names, or else a server started locally with cfg. An
// external server's Kind is its redacted URL and version; Stop drops what
// the run made there (the lab does so too once the experiment ends), and
// its StopServer, StartServer and Proc are ErrExternal and nil: an
// experiment skips rows that need them (ExternalReason). The caller
// stops it.
func (r *Run) Postgres(ctx context.Context, cfg deps.PostgresConfig) (*deps.Postgres, error) {
	if r.Opts.External.Postgres == "" {
		return deps.StartPostgres(ctx, r.Sandbox, cfg)
	}
	pg, err := deps.ConnectPostgres(ctx, r.Opts.External.Postgres, r.prefix)
	if err != nil {
		return nil, err
	}
	r.Progress.Logf("using the external postgres %s", pg.Kind)
	r.external(DepPostgres, pg.Kind, pg.Stop)
	return pg, nil
}

// Cassandra returns the Cassandra the experiment runs against: the node
// Opts.External names, or else one started locally with cfg. Keyspaces
// on an external node are named by its Keyspace method and dropped by
// Stop (the lab does so too once the experiment ends). The caller stops
// it.
func (r *Run) Cassandra(ctx context.Context, cfg deps.CassandraConfig) (*deps.Cassandra, error) {
	if r.Opts.External.Cassandra == "" {
		return deps.StartCassandra(ctx, r.Sandbox, cfg)
	}
	c, err := deps.ConnectCassandra(ctx, r.Opts.External.Cassandra, r.prefix)
	if err != nil {
		return nil, err
	}
	r.Progress.Logf("using the external cassandra %s", c.Kind)
	r.external(DepCassandra, c.Kind, c.Stop)
	return c, nil
}

// ExternalFor reports whether the run uses an external server for dep
// (DepPostgres, DepKafka, DepCassandra).
func (o Options) ExternalFor(dep string) bool {
	return slices.Contains(o.External.given(), dep)
}
