package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/asyncexp"
	"github.com/highload-lab/hlab/internal/lab/crudexp"
	"github.com/highload-lab/hlab/internal/lab/databusexp"
	"github.com/highload-lab/hlab/internal/lab/nosqlexp"
	"github.com/highload-lab/hlab/internal/lab/replicaexp"
	"github.com/highload-lab/hlab/internal/lab/scaleexp"
	"github.com/highload-lab/hlab/internal/lab/timeoutsexp"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/report"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// experiments lists every experiment, in the order "hlab lab" runs them.
func experiments() []lab.Experiment {
	return []lab.Experiment{
		scaleexp.New(),
		asyncexp.New(),
		nosqlexp.New(),
		replicaexp.New(),
		crudexp.New(),
		timeoutsexp.New(),
		databusexp.New(),
	}
}

func runLab(args []string, st *State) int {
	if len(args) > 0 && args[0] == compareAction {
		return runLabCompare(args[1:], st)
	}
	fs := newFlagSet(st, "lab", "hlab lab [NAME...] [--quick|--full] [--pairs N] [--repeat N] [--json FILE] [--report DIR] [--postgres URL] [--kafka-brokers HOST:PORT,...] [--cassandra HOST:PORT]\n       hlab lab compare A.json B.json (two runs' --json files; see hlab lab compare --help)", `
Runs the reference reports' experiments on this machine: each starts the
report's services as child processes under CPU/memory quotas like the
report's containers (cgroups), drives them with hlab's load generator from
outside the quota, and prints our figures beside the report's, with a
verdict on each of the report's claims. With no NAME it runs every
experiment. It also writes an HTML report with charts (DIR/index.html).

Experiments and their claims (the first reruns the report's own setup):
`+experimentList()+`
How a verdict is reached. A claim is a ratio between two rows. Its rows
run as pairs, back to back, their order alternating (AB, BA, ...), and
each pair gives a ratio; the verdict reads the 95% confidence interval of
those ratios: REPRODUCED when the whole interval clears the claim's
threshold, NOT REPRODUCED when it lies wholly beyond it, INCONCLUSIVE when
it straddles it. The lab adds pairs until a stricter 99.9% interval
decides or the time budget is spent (a minute and a half per set of
rows in quick mode), so a verdict does not flip with the run. A claim is
INVALID when a row it uses lost data, answered under 99% of requests (or
under its own stated bound), had a service die, or ran without its CPU
quota. Rates count successful requests only. Runs where processes
outside the lab took over a tenth of a core are marked noisy. The exit
status is 1 when an experiment failed or a claim is INVALID, 0 otherwise
(a claim that did not hold is a result).

Compare ratios, not absolute figures: the reports ran on other hardware.

To compare two runs of the lab (before and after a change), write each
with --json FILE and run "hlab lab compare A.json B.json".

On your own servers. --postgres, --kafka-brokers and --cassandra make
the experiments that use that dependency run against an existing server
instead of starting a local one, so a team can rerun an experiment on its
real cluster. The lab checks each server before the run (and that
--postgres has wal_level=logical where the replica experiment needs it),
never stops, restarts or kills one (rows that would are listed as not
rerun), and cannot put it under a quota: the report records each server,
its version and that its quotas are not the lab's. Everything a run makes
there is named hlab_<experiment>_<random>_... (databases and replication
slots, topics and consumer groups, keyspaces) and dropped when the
experiment ends, also when it fails or is interrupted. The Postgres user
needs CREATEDB (and REPLICATION for the replica experiment). Its URL
holds a password: give it in $HLAB_POSTGRES_URL or --postgres-file FILE
(mode 600), not --postgres, which every local user sees in ps while the
lab runs. The lab hands it, and every other secret, to its services
through their environment, never their command line; on a Postgres it
starts, each service connects as a role of its own that owns its
database and is no superuser. A secured Kafka takes the gateway's
--kafka-tls, --kafka-tls-ca, --kafka-tls-cert, --kafka-tls-key,
--kafka-sasl, --kafka-user, --kafka-password-file and --kafka-token-file
(docs/systems/databus.md, "Against a secured Kafka"); the lab checks them
against --kafka-brokers before the run and passes the file paths, never
the secrets, to the gateways and checkers it starts.`)
	full := fs.Bool("full", false, "use the reports' own durations (slower)")
	quick := fs.Bool("quick", false, "keep each experiment under about 90 s on 2 cores (the default)")
	repeat := fs.Int("repeat", 0, "measured runs of a row that no claim pairs (default 1 quick, 3 full)")
	pairs := fs.Int("pairs", 0, "measure exactly N pairs per claim instead of adding pairs until the verdict is decided")
	jsonPath := fs.String("json", "", "also write the results as JSON to FILE")
	reportDir := fs.String("report", "lab-report", "directory for the HTML report and service logs")
	lbKind := fs.String("lb", lab.LBAuto, "load balancer: auto (nginx if installed), nginx, or builtin")
	kafkaKind := fs.String("kafka", lab.KafkaFake, "Kafka for experiments that need it: kfake (embedded, in memory) or real (a KRaft broker; needs Java)")
	var pgURL string
	cliflag.SecretVar(fs, &pgURL, "postgres", "HLAB_POSTGRES_URL", "run against this Postgres instead of a local one: postgres://USER:PASSWORD@HOST:PORT/DB (the lab makes and drops databases of its own there, and its services connect as this user: give it one that is not a superuser)")
	var kafkaSec kafkasec.Config
	kafkaSec.RegisterFlags(fs)
	kafkaBrokers := fs.String("kafka-brokers", "", "run against these Kafka brokers instead of a local Kafka: HOST:PORT,HOST:PORT (the lab makes and deletes topics of its own there)")
	cassandra := fs.String("cassandra", "", "run against this Cassandra node instead of local ones: HOST:PORT of its CQL port (the lab makes and drops keyspaces of its own there)")
	list := fs.Bool("list", false, "list the experiments named (default all), their claims and every figure of their reports, rerun (where) or not (why) with the other flags given, and exit")
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return parseError(err)
	}
	if slices.Contains(names, compareAction) {
		return fail(st, "lab", 2, fmt.Errorf("%q compares two runs and comes first, before any flag: hlab lab compare A.json B.json", compareAction))
	}
	all := experiments()
	if *full && *quick {
		return fail(st, "lab", 2, fmt.Errorf("--quick and --full exclude each other"))
	}
	if *repeat < 0 {
		return fail(st, "lab", 2, fmt.Errorf("--repeat %d: give a positive number of runs", *repeat))
	}
	if *pairs < 0 || *pairs == 1 {
		return fail(st, "lab", 2, fmt.Errorf("--pairs %d: give 2 or more pairs (an interval needs at least two), or 0 for the default", *pairs))
	}
	exps, err := lab.Find(all, names)
	if err != nil {
		fmt.Fprintf(st.Stderr, "hlab lab: %v\n", err)
		lab.List(st.Stderr, all)
		return 2
	}
	opts := lab.Options{Mode: lab.Quick, Repeat: *repeat, Pairs: *pairs, LB: *lbKind, Kafka: *kafkaKind, WorkDir: filepath.Join(*reportDir, "logs")}
	if *full {
		opts.Mode = lab.Full
	}
	opts.External = lab.External{Postgres: pgURL, Cassandra: *cassandra, KafkaSecurity: kafkaSec}
	for _, b := range strings.Split(*kafkaBrokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			opts.External.KafkaBrokers = append(opts.External.KafkaBrokers, b)
		}
	}
	if *list {
		// What a run with these flags would rerun, figure by figure.
		lab.ListFigures(st.Stdout, exps, opts)
		return 0
	}
	if err := lab.CheckExternal(context.Background(), exps, opts); err != nil {
		return fail(st, "lab", 2, err)
	}
	if err := freshLogs(opts.WorkDir); err != nil {
		return fail(st, "lab", 1, err)
	}

	sb, err := sandbox.New()
	if err != nil {
		return fail(st, "lab", 1, err)
	}
	defer sb.Close()
	if sb.Mechanism() == sandbox.None {
		fmt.Fprintf(st.Stderr, "WARNING: no CPU/memory quota mechanism here (%s).\nWARNING: services run unconstrained; their figures are not comparable to the reports' limited containers.\n", sb.Reason())
	}
	machine := lab.ThisMachine(string(sb.Mechanism()))
	fmt.Fprintf(st.Stderr, "hlab lab: %d experiment(s), %s mode, %d CPUs, quota %s, %s; logs in %s\n",
		len(exps), opts.Mode, machine.CPUs, machine.CPUQuota, machine.Go, opts.WorkDir)

	started := time.Now()
	ctx, stop := interruptible()
	defer stop()
	prog := lab.NewProgress(st.Stderr, terminal(st.Stderr) != nil)
	results, runErr := lab.RunAll(ctx, exps, opts, sb, prog)
	stop()

	code := 0
	report.WriteScoreboard(st.Stdout, results)
	for _, res := range results {
		report.WriteText(st.Stdout, res)
		// A claim that did not hold is a result; a run that did not finish
		// or lost data is not: exit 1.
		if res.Error != "" || slices.ContainsFunc(res.Claims, func(c labresult.ClaimResult) bool { return c.Verdict == labresult.Invalid }) {
			code = 1
		}
	}
	doc := labresult.Document{Machine: machine, Started: started.UTC().Truncate(time.Second), Experiments: results}
	if *jsonPath != "" {
		if err := labresult.WriteJSONFile(*jsonPath, doc); err != nil {
			return fail(st, "lab", 1, err)
		}
		fmt.Fprintf(st.Stderr, "hlab lab: wrote %s\n", *jsonPath)
	}
	if len(results) > 0 {
		path, err := report.WriteHTML(*reportDir, doc)
		if err != nil {
			return fail(st, "lab", 1, err)
		}
		fmt.Fprintf(st.Stderr, "hlab lab: wrote %s\n", path)
	}
	if runErr != nil {
		return fail(st, "lab", 130, runErr)
	}
	return code
}

// interruptible returns a context that Ctrl-C or SIGTERM cancels: the run
// stops and the deferred sandbox Close stops every child and removes
// every cgroup. A second signal kills hlab at once, and the children
// follow it (they die with their parent; the next run sweeps the cgroups).
func interruptible() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the next signal takes its default action: exit at once
	}()
	return ctx, stop
}

// logsMark marks a logs directory as the lab's own, so that a later run
// may empty it.
const logsMark = ".hlab-lab-logs"

// freshLogs empties dir for this run's logs, or makes it. It refuses a
// dir the lab did not make (--report . must not delete ./logs).
func freshLogs(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		if !labLogs(dir) {
			return fmt.Errorf("%s exists and was not made by hlab lab, so it is left alone: give another --report DIR, or move it away", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("emptying the last run's logs: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, logsMark), []byte("service logs of the last hlab lab run; the next run empties this directory\n"), 0o644)
}

// labLogs reports whether dir holds a lab run's logs: it carries the
// mark, or (from before the mark) holds nothing but experiments' folders.
func labLogs(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, logsMark)); err == nil {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := lab.Find(experiments(), []string{e.Name()}); err != nil || !e.IsDir() {
			return false
		}
	}
	return true
}

func experimentList() string {
	var b strings.Builder
	lab.List(&b, experiments())
	return b.String()
}
