package depsctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/deploy/grafana"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// SuperviseCmd is the hidden subcommand of hlab deps that Up runs as the
// supervisor: hlab deps supervise NAME --state-dir DIR [--upstream ...],
// which calls Supervise.
const SuperviseCmd = "supervise"

// SuperviseArgs returns the arguments of hlab that run the supervisor
// of name in dir.
func SuperviseArgs(name, dir string, upstreams []string) []string {
	args := []string{"deps", SuperviseCmd, name, "--state-dir", dir}
	if len(upstreams) > 0 {
		args = append(args, "--upstream", strings.Join(upstreams, ","))
	}
	return args
}

// prometheusRetention is how long a standalone Prometheus keeps its
// samples: enough to compare this week's runs with last week's, Prometheus'
// own default.
const prometheusRetention = 15 * 24 * time.Hour

// running is a started dependency as the supervisor holds it.
type running struct {
	kind, conn, addr string
	proc             func() *sandbox.Process // nil: it runs in this process (kfake)
	stop             func() error
}

// Supervise is the supervisor's body: it starts name with its data in
// dir, writes dir's state file once it answers, and stops it when ctx
// ends or SIGTERM or SIGINT arrives, then removes the state file. It
// returns early with an error when the dependency fails to start or dies.
// Progress goes to log (the supervisor's log file).
func Supervise(ctx context.Context, name, dir string, upstreams []string, log io.Writer) error {
	d, err := Parse(name)
	if err != nil {
		return err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	signal.Ignore(syscall.SIGHUP)
	sigCtx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	sb, err := sandbox.New()
	if err != nil {
		return err
	}
	defer sb.Close()
	if sb.Mechanism() == sandbox.None {
		fmt.Fprintf(log, "depsctl: no cgroups (%s): the dependency runs without one, still cleaned up on down\n", sb.Reason())
	}
	// The dependency's life is this process's, not the signal's: on
	// SIGTERM it is stopped with its own grace (Cassandra drains for up
	// to 30 s), not the sandbox's default. A signal while it starts
	// cancels the start.
	life, cancelLife := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLife()
	abort := context.AfterFunc(sigCtx, cancelLife)
	start := time.Now()
	r, err := startDep(life, sb, d, dir, rememberedPort(dir), upstreams, log)
	if !abort() || err != nil {
		if err == nil {
			r.stop()
			err = errors.New("depsctl: stopped while starting")
		}
		return err
	}
	_, portStr, _ := net.SplitHostPort(r.addr)
	port, _ := strconv.Atoi(portStr)
	if err := os.WriteFile(filepath.Join(dir, portFile), []byte(portStr+"\n"), 0o644); err != nil {
		r.stop()
		return fmt.Errorf("depsctl: remember the port: %w", err)
	}
	s := State{Name: name, Kind: r.kind, PID: os.Getpid(), Conn: r.conn, Port: port, Upstreams: upstreams, StateDir: dir, Started: time.Now().UTC().Truncate(time.Second)}
	var exited <-chan struct{}
	if r.proc != nil {
		p := r.proc()
		s.DepPID, exited = p.PID(), p.Done()
	}
	if d.kind == "kafka-cluster" {
		// A broker of a cluster may crash (a user's fault experiment)
		// while the others serve: its end does not end the supervisor.
		exited = nil
	}
	if err := writeState(dir, s); err != nil {
		r.stop()
		return err
	}
	defer os.Remove(filepath.Join(dir, stateFile))
	fmt.Fprintf(log, "depsctl: %s (%s) ready at %s in %s, pid %d\n", name, r.kind, r.addr, time.Since(start).Round(time.Millisecond), s.DepPID)
	select {
	case <-sigCtx.Done():
		fmt.Fprintf(log, "depsctl: stopping %s\n", name)
		err := r.stop()
		if err == nil {
			err = sb.Close()
		}
		if err != nil {
			return fmt.Errorf("depsctl: stop %s: %w", name, err)
		}
		fmt.Fprintf(log, "depsctl: %s stopped\n", name)
		return nil
	case <-exited:
		err := r.proc().ExitErr()
		r.stop()
		return fmt.Errorf("depsctl: %s exited on its own (%v); its logs are in %s", name, err, filepath.Join(dir, dataDir))
	}
}

// startDep starts d with its files in dir/data, on port when it is not 0.
func startDep(ctx context.Context, sb *sandbox.Sandbox, d Dep, dir string, port int, upstreams []string, log io.Writer) (*running, error) {
	data := filepath.Join(dir, dataDir)
	jvm := deps.JVMConfig{Log: log}
	switch d.kind {
	case "postgres":
		data, err := postgresDir(dir)
		if err != nil {
			return nil, err
		}
		// Durable: data kept across restarts should survive a crash too.
		p, err := deps.StartPostgres(ctx, sb, deps.PostgresConfig{Dir: data, Keep: true, Port: port, Durable: true})
		if err != nil {
			return nil, err
		}
		return &running{p.Kind, p.DSN("postgres"), p.Addr, p.Proc, p.Stop}, nil
	case "kfake", "kafka-real", "kafka-secure", "kafka-cluster":
		cfg := deps.KafkaConfig{Kind: deps.KafkaFake, Port: port}
		if d.kind != "kfake" {
			cfg = deps.KafkaConfig{Kind: deps.KafkaReal, Version: d.kafkaVersion, Dir: data, Keep: true, Port: port, JVMConfig: jvm, Secure: d.kind == "kafka-secure"}
		}
		if d.kind == "kafka-cluster" {
			cfg.Nodes = deps.ClusterNodes
		}
		k, err := deps.StartKafka(ctx, sb, cfg)
		if err != nil {
			return nil, err
		}
		if k.Secure != nil {
			if err := writeSecureEnv(dir, k.Secure); err != nil {
				k.Stop()
				return nil, err
			}
		}
		r := &running{k.Kind, strings.Join(k.Brokers, ","), k.Brokers[0], k.Proc, k.Stop}
		if k.Embedded {
			r.proc = nil
		}
		return r, nil
	case "cassandra":
		c, err := deps.StartCassandra(ctx, sb, deps.CassandraConfig{Dir: data, Keep: true, Port: port, JVMConfig: jvm})
		if err != nil {
			return nil, err
		}
		return &running{c.Kind, c.Addr, c.Addr, c.Proc, c.Stop}, nil
	case "redis":
		r, err := deps.StartRedis(ctx, sb, deps.RedisConfig{Dir: data, Port: port})
		if err != nil {
			return nil, err
		}
		return &running{r.Kind, "redis://" + r.Addr, r.Addr, r.Proc, r.Stop}, nil
	case "mongo":
		m, err := deps.StartMongo(ctx, sb, deps.MongoConfig{Dir: data, Port: port, JVMConfig: jvm})
		if err != nil {
			return nil, err
		}
		return &running{m.Kind, m.URI, m.Addr, m.Proc, m.Stop}, nil
	case "prometheus":
		// The scrape config and rules the dashboards ship with; its
		// series stay in data/ across down and up.
		p, err := deps.StartPrometheus(ctx, sb, deps.PrometheusConfig{
			Config: grafana.ScrapeConfig(), Files: grafana.AlertRules(),
			Dir: data, Keep: true, Port: port, Retention: prometheusRetention,
		})
		if err != nil {
			return nil, err
		}
		return &running{p.Kind, p.URL, p.Addr, p.Proc, p.Stop}, nil
	case "nginx":
		cfg := deps.NginxConfig{Upstreams: upstreams, Dir: data, Port: port}
		if len(upstreams) == 0 {
			cfg.HealthPath = "/" // nginx answers it itself
		}
		n, err := deps.StartNginx(ctx, sb, cfg)
		if err != nil {
			return nil, err
		}
		return &running{"nginx " + n.Version, "http://" + n.Addr, n.Addr, func() *sandbox.Process { return n.Proc }, n.Stop}, nil
	}
	return nil, fmt.Errorf("depsctl: no way to start %q", d.Name)
}
