package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/depsctl"
)

func runDeps(args []string, st *State) int {
	fs := newFlagSet(st, "deps", "hlab deps status|install|up|down|ps [NAME...] [flags]", depsAbout())
	stateDir := fs.String("state-dir", "", "the dependency's state directory: its data, state.json, supervisor.log (default $XDG_STATE_HOME/hlab/deps/NAME, else ~/.local/state/hlab/deps/NAME; for ps, the directory of state directories)")
	upstreams := fs.String("upstream", "", "up nginx: HOST:PORT,... to balance over, round robin (default none: nginx answers 200 itself)")
	timeout := fs.Duration("timeout", 5*time.Minute, "up: how long to wait for the dependency to answer (a first start that downloads jars included)")
	topics := fs.String("topics", "", "up kafka, kafka-real, kafka-secure, kafka-cluster: topics to create if missing, comma-separated (none creates a topic on first use; kafka-cluster replicates them 3 times)")
	partitions := fs.Int("partitions", 0, "up --topics: partitions of each topic created (default: the broker's, 10)")
	purge := fs.Bool("purge", false, "down: also remove the state directory, data included")
	jsonOut := fs.Bool("json", false, "ps: print the states as a JSON array")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) == 0 {
		fs.Usage()
		return 2
	}
	opt := depsctl.Options{StateDir: *stateDir, Timeout: *timeout, Log: st.Stderr}
	if *upstreams != "" {
		opt.Upstreams = strings.Split(*upstreams, ",")
	}
	var topicList []string
	if *topics != "" {
		topicList = strings.Split(*topics, ",")
	}
	switch pos[0] {
	case "status":
		depsStatus(st)
		return 0
	case "install":
		return depsInstall(st, pos[1:])
	case "up", "down", depsctl.SuperviseCmd:
		names := pos[1:]
		switch {
		case len(names) == 0:
			return fail(st, "deps", 2, fmt.Errorf("%s needs a NAME, one of %s (or kafka@VERSION)", pos[0], strings.Join(depsctl.Names(), ", ")))
		case len(names) > 1 && (*stateDir != "" || pos[0] == depsctl.SuperviseCmd):
			return fail(st, "deps", 2, fmt.Errorf("--state-dir is one dependency's directory: give one NAME with it, not %d", len(names)))
		}
		for _, n := range names {
			if _, err := depsctl.Parse(n); err != nil {
				return fail(st, "deps", 2, err)
			}
		}
		switch pos[0] {
		case "up":
			for _, n := range names {
				if d, _ := depsctl.Parse(n); topicList != nil && !d.Kafka() {
					return fail(st, "deps", 2, fmt.Errorf("--topics is for kafka, kafka-real, kafka-secure and kafka-cluster, not %s", n))
				}
			}
			for _, n := range names {
				if code := depsUp(st, n, opt, topicList, *partitions); code != 0 {
					return code
				}
			}
			return 0
		case "down":
			code := 0
			for _, n := range names {
				code = max(code, depsDown(st, n, opt, *purge))
			}
			return code
		}
		// The supervisor that up runs, detached; its output is its log.
		if err := depsctl.Supervise(context.Background(), names[0], *stateDir, opt.Upstreams, st.Stderr); err != nil {
			return fail(st, "deps supervise", 1, err)
		}
		return 0
	case "ps":
		return depsPs(st, *stateDir, *jsonOut)
	}
	return fail(st, "deps", 2, fmt.Errorf("unknown action %q: use status, install, up, down or ps", pos[0]))
}

// depsAbout is deps' help text, with the table of what up starts.
func depsAbout() string {
	var b strings.Builder
	b.WriteString(`Checks, installs and runs the real dependencies the lab and tests use.
  status              which dependencies are installed, with their versions
  install NAME...     install them (Debian's packages need root and
                      apt-get; the JVM ones fetch jars from Maven Central);
                      install kafka-tools[@VERSION] fetches Kafka's
                      command-line tools and prints their jars' directory
                      (java -cp 'DIR/*' ` + deps.ProducerPerfClass + `
                      is kafka-producer-perf-test.sh)
  up NAME...          start each NAME in the background and print ONE line
                      on stdout per NAME, its connection string (progress
                      goes to stderr), once it answers:
                        hlab serve tasks --dsn "$(hlab deps up postgres)"
                      Up again while it runs prints the same line and
                      starts nothing. The client port is a free one at the
                      first up, then the same at every later up of that
                      state directory, so the string stays the same
                      (Postgres keeps its password too).
  down NAME...        stop it (SIGTERM, then SIGKILL to whatever is left
                      after 45 s), keeping its data for the next up;
                      --purge removes the state directory too. Down of
                      something not running says so and succeeds.
  ps                  what runs: name, pids, connection string, state
                      directory, uptime (--json for machines)

NAME for up and down:
`)
	for _, d := range depsctl.Deps {
		fmt.Fprintf(&b, "  %-13s %s\n  %-13s   prints %s\n", d.Name, d.What, "", d.Prints)
	}
	b.WriteString(`  kafka@VERSION   the real broker of that version (` + strings.Join(deps.KafkaVersions(), ", ") + `)

Nginx with upstreams is ready once GET /healthz through it answers 200 (as
every hlab serve service does): start the upstreams first. Prometheus runs
deploy/grafana's prometheus.yml and alert rules as shipped (built into
hlab): start the services where it scrapes them (hlab serve tasks
--admin-addr 127.0.0.1:6060; catalog and pricing with --addr
127.0.0.1:8081 and 127.0.0.1:8082; the gateway at its default), point
Grafana's Prometheus data source at the URL it prints and import
deploy/grafana's dashboards; its own UI at URL/graph shows what it
reaches (Status, Targets) and the alert rules (Alerts). For other
addresses, run prometheus --config.file with your own copy of that file.

Each dependency runs under a supervisor (hlab deps supervise, a process
of its own session) that stops it on down; its output and the reason a
start failed are in STATE_DIR/supervisor.log, the dependency's own files
and logs in STATE_DIR/data (for Postgres, when the postgres user cannot
reach the state directory, e.g. under /root, a link to
/var/lib/postgresql/hlab/NAME-HASH). The lab starts and stops its
dependencies itself and needs none of this; when nginx is missing it uses
its built-in load balancer and says so.`)
	return b.String()
}

// depsUp starts name (or finds it running) and prints its connection
// string.
func depsUp(st *State, name string, opt depsctl.Options, topics []string, partitions int) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, started, err := depsctl.Up(ctx, name, opt)
	if err != nil {
		return fail(st, "deps", 1, err)
	}
	if started {
		fmt.Fprintf(st.Stderr, "hlab deps: %s (%s) runs in the background, pid %d, state in %s; stop it with: hlab deps down %s%s\n", name, s.Kind, s.PID, s.StateDir, name, stateDirFlag(opt.StateDir))
	} else {
		fmt.Fprintf(st.Stderr, "hlab deps: %s runs already (pid %d, up %s)\n", name, s.PID, time.Since(s.Started).Round(time.Second))
		if opt.Upstreams != nil && !slices.Equal(opt.Upstreams, s.Upstreams) {
			fmt.Fprintf(st.Stderr, "hlab deps: warning: it runs with upstreams %q, not the --upstream given: hlab deps down %s first to change them\n", cmp.Or(strings.Join(s.Upstreams, ","), "none"), name)
		}
	}
	if name == "mongo" {
		fmt.Fprintf(st.Stderr, "hlab deps: mongo is a stand-in, not MongoDB: %s\n", deps.MongoStandInKind)
	}
	if name == "prometheus" {
		fmt.Fprintf(st.Stderr, "hlab deps: its UI: %[1]s/graph (Status, Targets: what it reaches; Alerts: the rules); in Grafana, a Prometheus data source at %[1]s with a 15s scrape interval, then deploy/grafana's dashboards\n", s.Conn)
	}
	if name == "kafka-secure" {
		fmt.Fprintf(st.Stderr, "hlab deps: its secured listeners and the CA, password and token files: . %s\n", filepath.Join(s.StateDir, depsctl.SecureEnvFile))
	}
	if err := depsctl.EnsureTopics(ctx, s.Conn, partitions, topics); err != nil {
		return fail(st, "deps", 1, err)
	}
	fmt.Fprintln(st.Stdout, s.Conn)
	return 0
}

// stateDirFlag repeats --state-dir for a hint, "" when it was not given.
func stateDirFlag(dir string) string {
	if dir == "" {
		return ""
	}
	return " --state-dir " + dir
}

func depsDown(st *State, name string, opt depsctl.Options, purge bool) int {
	d, _ := depsctl.Parse(name) // parsed by the caller
	was, err := depsctl.Down(name, opt, purge)
	if err != nil {
		return fail(st, "deps", 1, err)
	}
	switch {
	case was && purge:
		fmt.Fprintf(st.Stderr, "hlab deps: %s stopped, its data removed\n", name)
	case was && d.Keeps:
		fmt.Fprintf(st.Stderr, "hlab deps: %s stopped; its data stays for the next up (down --purge removes it)\n", name)
	case was:
		fmt.Fprintf(st.Stderr, "hlab deps: %s stopped (it kept its data in memory: the next up starts empty)\n", name)
	case purge:
		fmt.Fprintf(st.Stderr, "hlab deps: %s was not running; its data, if any, removed\n", name)
	default:
		fmt.Fprintf(st.Stderr, "hlab deps: %s is not running\n", name)
	}
	return 0
}

func depsPs(st *State, root string, asJSON bool) int {
	states, err := depsctl.List(root)
	if err != nil {
		return fail(st, "deps", 1, err)
	}
	if asJSON {
		if states == nil {
			states = []depsctl.State{}
		}
		enc := json.NewEncoder(st.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(states); err != nil {
			return fail(st, "deps", 1, err)
		}
		return 0
	}
	if len(states) == 0 {
		fmt.Fprintln(st.Stderr, "hlab deps: nothing runs (hlab deps up NAME starts one)")
		return 0
	}
	tw := tabwriter.NewWriter(st.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPID\tDEP PID\tUPTIME\tCONNECTION\tSTATE DIR")
	for _, s := range states {
		dep := "in-process" // kfake runs inside its supervisor
		if s.DepPID > 0 {
			dep = strconv.Itoa(s.DepPID)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", s.Name, s.PID, dep, time.Since(s.Started).Round(time.Second), s.Conn, s.StateDir)
	}
	tw.Flush()
	return 0
}

func depsStatus(st *State) {
	if _, v, err := deps.FindNginx(); err == nil {
		fmt.Fprintf(st.Stdout, "nginx  installed, %s\n", v)
	} else {
		fmt.Fprintf(st.Stdout, "nginx  missing (hlab deps install nginx); the lab falls back to its built-in load balancer\n")
	}
	if p, err := exec.LookPath("wrk"); err == nil {
		fmt.Fprintf(st.Stdout, "wrk    installed, %s\n", p)
	} else {
		fmt.Fprintf(st.Stdout, "wrk    missing (hlab deps install wrk); only the comparison script needs it\n")
	}
	if _, v, err := deps.FindRedis(); err == nil {
		fmt.Fprintf(st.Stdout, "redis  installed, %s\n", v)
	} else {
		fmt.Fprintf(st.Stdout, "redis  missing (hlab deps install redis); report B's benchmark skips Redis without it\n")
	}
	if _, v, err := deps.FindPrometheus(); err == nil {
		fmt.Fprintf(st.Stdout, "prometheus  installed, %s (with promtool)\n", v)
	} else {
		fmt.Fprintf(st.Stdout, "prometheus  missing (hlab deps install prometheus); deploy/grafana's tests and hlab deps up prometheus need it\n")
	}
	switch ms, err := deps.CheckMongo(); {
	case err != nil:
		fmt.Fprintf(st.Stdout, "mongo  unknown: %v\n", err)
	case ms.Ready():
		fmt.Fprintf(st.Stdout, "mongo  ready: %s in %s (a stand-in, not MongoDB)\n", deps.MongoStandInKind, ms.LibDir)
	case ms.JavaErr != nil:
		fmt.Fprintf(st.Stdout, "mongo  missing (hlab deps install mongo): %v\n", ms.JavaErr)
	default:
		fmt.Fprintf(st.Stdout, "mongo  not fetched yet (hlab deps install mongo, or the first start fetches %s)\n", deps.MongoStandInKind)
	}
	kafkaStatus(st)
	cassandraStatus(st)
}

// depsInstall installs names (nginx and wrk when none).
func depsInstall(st *State, names []string) int {
	if len(names) == 0 {
		names = []string{"nginx", "wrk"}
	}
	var apt []string
	mongo := false
	cassandra := false
	postgres14 := false
	prometheus := false
	var kafkas, tools []string // versions; "" = the default
	for _, n := range names {
		if v, ok := strings.CutPrefix(n, "kafka-tools"); ok && (v == "" || v[0] == '@') {
			tools = append(tools, strings.TrimPrefix(v, "@"))
			continue
		}
		if v, ok := strings.CutPrefix(n, "kafka"); ok && (v == "" || v[0] == '@') {
			kafkas = append(kafkas, strings.TrimPrefix(v, "@"))
			continue
		}
		switch n {
		case "nginx", "wrk":
			apt = append(apt, n)
		case "redis":
			apt = append(apt, "redis-server")
		case "prometheus":
			prometheus = true
		case "cassandra":
			cassandra = true
		case "postgres14":
			postgres14 = true
		case "mongo":
			mongo = true
		default:
			return fail(st, "deps", 2, fmt.Errorf("no installer for %q; known: nginx, wrk, redis, prometheus, mongo, kafka[@VERSION], kafka-tools[@VERSION], cassandra, postgres14", n))
		}
	}
	if err := deps.AptInstall(st.Stderr, apt...); err != nil {
		return fail(st, "deps", 1, err)
	}
	if prometheus {
		if err := deps.InstallPrometheus(context.Background(), st.Stderr); err != nil {
			return fail(st, "deps", 1, err)
		}
	}
	if mongo {
		if err := deps.InstallMongo(context.Background(), st.Stderr); err != nil {
			return fail(st, "deps", 1, err)
		}
	}
	if cassandra {
		if err := deps.InstallCassandra(context.Background(), st.Stderr); err != nil {
			return fail(st, "deps", 1, err)
		}
	}
	if postgres14 {
		if err := deps.InstallPostgres14(context.Background(), st.Stderr); err != nil {
			return fail(st, "deps", 1, err)
		}
	}
	for _, v := range kafkas {
		if err := deps.InstallKafka(context.Background(), st.Stderr, v); err != nil {
			return fail(st, "deps", 1, err)
		}
	}
	// Kafka's own tools are not among the broker's jars: fetched beside
	// them, for kafka-producer-perf-test and the like (bench/databus.sh).
	for _, v := range tools {
		lib, err := deps.FetchKafkaTools(context.Background(), v, st.Stderr)
		if err != nil {
			return fail(st, "deps", 1, err)
		}
		fmt.Fprintln(st.Stdout, lib)
	}
	return 0
}

// kafkaStatus prints what the real Kafka broker needs and has; kfake, the
// embedded default, is always there.
func kafkaStatus(st *State) {
	ks, err := deps.CheckKafka("")
	if err != nil {
		fmt.Fprintf(st.Stdout, "kafka  kfake (embedded, the default) ready; real broker unknown: %v\n", err)
		return
	}
	tools := "java missing"
	if ks.JavaErr == nil {
		tools = "java " + ks.JavaVersion
	}
	if ks.MavenErr == nil {
		tools += ", maven " + ks.MavenVer
	} else {
		tools += ", maven missing"
	}
	switch {
	case ks.Ready():
		fmt.Fprintf(st.Stdout, "kafka  kfake (embedded, the default) ready; real broker kafka %s ready: jars in %s (%.0f MB), %s\n", ks.Version, ks.LibDir, ks.SizeMB, tools)
	case ks.JavaErr != nil || (!ks.Cached && ks.MavenErr != nil):
		fmt.Fprintf(st.Stdout, "kafka  kfake (embedded, the default) ready; real broker kafka %s missing (hlab deps install kafka): %s\n", ks.Version, tools)
	default:
		fmt.Fprintf(st.Stdout, "kafka  kfake (embedded, the default) ready; real broker kafka %s not fetched yet (hlab deps install kafka, or the first start fetches it into %s), %s\n", ks.Version, ks.LibDir, tools)
	}
}

// cassandraStatus prints what the real Cassandra node needs and has.
func cassandraStatus(st *State) {
	cs, err := deps.CheckCassandra()
	switch {
	case err != nil:
		fmt.Fprintf(st.Stdout, "cassandra  unknown: %v\n", err)
	case cs.Ready():
		fmt.Fprintf(st.Stdout, "cassandra  %s ready: jars in %s (%.0f MB), java %s\n", deps.CassandraKind, cs.LibDir, cs.SizeMB, cs.JavaVersion)
	case cs.JavaErr != nil || (!cs.Cached && cs.MavenErr != nil):
		why := cs.JavaErr
		if why == nil {
			why = cs.MavenErr
		}
		fmt.Fprintf(st.Stdout, "cassandra  %s missing (hlab deps install cassandra): %v\n", deps.CassandraKind, why)
	default:
		fmt.Fprintf(st.Stdout, "cassandra  %s not fetched yet (hlab deps install cassandra, or the first start fetches it into %s)\n", deps.CassandraKind, cs.LibDir)
	}
}
