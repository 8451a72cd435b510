// Package lab runs experiments: each starts a system's services under CPU
// and memory quotas (internal/sandbox), drives them with loadgen, and turns
// what it measured into rows beside the reference report's figures, with a
// verdict on the report's claim. An experiment is one package under
// internal/lab/<name> implementing Experiment.
package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
)

// Experiment is one report's experiment: a declaration (Spec) and a run.
// A new experiment is a package under internal/lab/<name> with a type
// that implements it; CONTRIBUTING.md walks through one.
type Experiment interface {
	// Spec declares the experiment with opts: its rows, claims, targets,
	// figures and coverage of the report (see Spec).
	Spec(opts Options) Spec
	// Estimate is how long Run takes with opts, for progress and ETAs.
	Estimate(opts Options) time.Duration
	// Run measures. It adds the rows its Spec declares, and environment,
	// to run; an error means the experiment could not finish (a claim
	// that does not hold is not an error). Keep it a short list of phase
	// calls: what each phase measures belongs in a method of its own.
	Run(ctx context.Context, run *Run) error
}

// Name is e's name (its Spec's, with default options).
func Name(e Experiment) string { return e.Spec(Options{}).Name }

// Mode is how long experiments run.
type Mode string

const (
	// Quick keeps each experiment under about 90 s on a 2-core machine.
	Quick Mode = "quick"
	// Full uses the reports' own durations.
	Full Mode = "full"
)

// LB choices for experiments that put a load balancer in front of replicas.
const (
	LBAuto    = "auto"    // nginx when installed, else the built-in one
	LBNginx   = "nginx"   // real nginx; an error when not installed
	LBBuiltin = "builtin" // the embedded default (internal/lb)
)

// Kafka choices for experiments that need Kafka (the names of
// deps.KafkaKind).
const (
	KafkaFake = "kfake" // franz-go's kfake, in memory: the embedded default
	KafkaReal = "real"  // Apache Kafka, a single KRaft node (Java, jars from Maven Central)
	// KafkaExternal is set by the lab when Options.External names
	// brokers: a cluster it did not start.
	KafkaExternal = "external"
)

// Options are the lab's settings shared by every experiment.
type Options struct {
	Mode Mode
	// Repeat is how many measured runs make a row that no claim pairs
	// (median, min, max). Zero means the default: 1 in quick mode, 3 in
	// full mode.
	Repeat int
	// Pairs, when > 0, fixes the rounds of every Paired set (each claim's
	// pairs) instead of adding rounds until the verdict is decided.
	Pairs int
	// LB picks the load balancer: LBAuto, LBNginx or LBBuiltin.
	LB string
	// Kafka picks the Kafka of experiments that need one: KafkaFake (""
	// too: the embedded default) or KafkaReal (a KRaft broker on the JVM).
	Kafka string
	// External names servers to run against instead of starting local
	// ones (hlab lab --postgres, --kafka-brokers, --cassandra).
	External External
	// Self is the hlab executable that services are started from
	// ("hlab serve NAME"). Default: this process's executable.
	Self string
	// WorkDir holds service logs and generated configs for a run.
	WorkDir string

	// Short shrinks every run (to its sampling window's end, if later)
	// and warm-up to a fifth of a second and drops the request floor: for
	// tests of the lab's wiring, never for figures.
	Short bool
}

const shortRun = 200 * time.Millisecond

// RunDuration is how long one measured run lasts: the report's duration in
// full mode, at most quick in quick mode (and never under MinRun).
func (o Options) RunDuration(report, quick time.Duration) time.Duration {
	if o.Mode == Full {
		return report
	}
	return min(report, quick)
}

// MinRun is the shortest measured run: no run is shorter than the
// duration, nor, where the warm-up's rate tells, too short for the
// requests (a few hundred requests give a p99 of a handful of them).
func (o Options) MinRun() (time.Duration, int64) {
	if o.Short {
		return shortRun, 0
	}
	return 5 * time.Second, 2000
}

// Warmup is the load sent before measuring a row, so connection set-up,
// JIT-free but cache- and allocator-warm code and CPU quota accounting settle.
func (o Options) Warmup() time.Duration {
	if o.Short {
		return shortRun
	}
	if o.Mode == Full {
		return 2 * time.Second
	}
	return time.Second
}

// Repeats returns Repeat or its mode default.
func (o Options) Repeats() int {
	if o.Repeat > 0 {
		return o.Repeat
	}
	if o.Mode == Full {
		return 3
	}
	return 1
}

// PairBudget is the time a set of Paired rounds may take by default:
// a minute and a half in quick mode (an experiment's whole run then
// stays about 2 to 3 minutes on 2 cores), ten in full mode (where each
// run lasts as long as the report's). At least DefaultMinRounds run
// whatever it says.
func (o Options) PairBudget() time.Duration {
	if o.Mode == Full {
		return 10 * time.Minute
	}
	return 90 * time.Second
}

func (o *Options) setDefaults() error {
	if o.Mode == "" {
		o.Mode = Quick
	}
	if o.LB == "" {
		o.LB = LBAuto
	}
	switch o.LB {
	case LBAuto, LBNginx, LBBuiltin:
	default:
		return fmt.Errorf("lab: unknown load balancer %q: use auto, nginx or builtin", o.LB)
	}
	if o.Kafka == "" {
		o.Kafka = KafkaFake
	}
	if len(o.External.KafkaBrokers) > 0 {
		if o.Kafka == KafkaReal {
			return fmt.Errorf("lab: --kafka real and --kafka-brokers exclude each other: the first starts a broker, the second uses yours")
		}
		o.Kafka = KafkaExternal
	}
	if o.Kafka != KafkaFake && o.Kafka != KafkaReal && o.Kafka != KafkaExternal {
		return fmt.Errorf("lab: unknown kafka %q: use kfake (embedded) or real", o.Kafka)
	}
	if o.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("lab: cannot find the hlab executable to start services: %w", err)
		}
		o.Self = self
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "hlab-lab-")
		if err != nil {
			return fmt.Errorf("lab: work dir: %w", err)
		}
		o.WorkDir = dir
	}
	// Child processes get paths from it (nginx resolves relative ones
	// against its own prefix), so make it absolute once here.
	dir, err := filepath.Abs(o.WorkDir)
	if err != nil {
		return fmt.Errorf("lab: work dir: %w", err)
	}
	o.WorkDir = dir
	return nil
}

// ThisMachine describes the current machine with the given quota mechanism.
func ThisMachine(quota string) labresult.Machine {
	m := labresult.Machine{CPUs: runtime.NumCPU(), CPUQuota: quota, Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// Find returns the experiments named, in the order given; no names means
// all. An unknown name is an error that lists the known ones.
func Find(all []Experiment, names []string) ([]Experiment, error) {
	if len(names) == 0 {
		return all, nil
	}
	byName := map[string]Experiment{}
	var known []string
	for _, e := range all {
		byName[Name(e)] = e
		known = append(known, Name(e))
	}
	var out []Experiment
	for _, n := range names {
		e, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("lab: no experiment %q; known experiments: %s", n, strings.Join(known, ", "))
		}
		out = append(out, e)
	}
	return out, nil
}

// List writes the experiments with their titles and claims, the first
// (the report's own setup) marked.
func List(w io.Writer, all []Experiment) { list(w, all, Options{}, false) }

// ListFigures is List with every figure of each report, rerun (where) or
// not (why), and every target, with opts: "hlab lab --list".
func ListFigures(w io.Writer, all []Experiment, opts Options) { list(w, all, opts, true) }

func list(w io.Writer, all []Experiment, opts Options, figures bool) {
	for _, e := range all {
		s := e.Spec(opts)
		fmt.Fprintf(w, "  %-10s %s\n", s.Name, s.Title)
		for i, c := range s.Claims {
			what := "claim"
			if i == 0 {
				what = "claim (report's setup"
				if d := labresult.DifferencesText(s.Setup); d != "" {
					what += "; " + d
				}
				what += ")"
			}
			fmt.Fprintf(w, "  %-10s %d. %s: %s\n", "", i+1, what, c.Text)
		}
		if !figures {
			continue
		}
		for _, t := range s.Targets {
			if !t.Bound.IsZero() {
				fmt.Fprintf(w, "  %-10s target: %s (%s)\n", "", t.Text, t.Bound)
			}
		}
		if len(s.Setup) > 0 {
			fmt.Fprintf(w, "  %-10s %s:\n", "", labresult.SetupLegend)
			for _, e := range s.Setup {
				fmt.Fprintf(w, "  %-10s %s\n", "", e.Line())
				if e.Why != "" {
					fmt.Fprintf(w, "  %-10s     why: %s\n", "", e.Why)
				}
			}
		}
		if len(s.Figures) > 0 {
			fmt.Fprintf(w, "  %-10s the report's figures (+ rerun, - not rerun):\n", "")
			for _, f := range s.Figures {
				if f.Rerun != "" {
					fmt.Fprintf(w, "  %-10s + %s\n  %-10s     in %s\n", "", f.Figure, "", f.Rerun)
				} else {
					fmt.Fprintf(w, "  %-10s - %s\n  %-10s     not rerun: %s\n", "", f.Figure, "", f.Why)
				}
			}
		}
	}
}
