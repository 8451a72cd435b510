package lab

import (
	"errors"
	"fmt"
	"slices"

	"github.com/highload-lab/hlab/internal/labresult"
)

// Spec declares an experiment, once: its name, the rows it can measure
// (each a stable key and a label), the report's claims and our targets
// over those keys, the figures of its own its rows carry, and how it
// covers every figure of its report. The runner checks a Spec before the
// experiment runs (Validate) and holds the run to it: a row whose key the
// Spec does not declare, or a figure it does not declare, fails the
// experiment, so a typo fails at once rather than as a claim that was
// "not measured" three layers later.
type Spec struct {
	// Name is the short name users type: "hlab lab scale".
	Name string
	// Title is a one-line description for listings.
	Title string
	// Rows are every row the experiment measures with these options, in
	// the order they are shown (the result lists them so, whatever order
	// the phases measured them in).
	Rows []RowSpec
	// Claims are the report's claims as ratios between rows. The first is
	// the headline claim and runs the report's own setup.
	Claims []labresult.Claim
	// Targets are our own judgements (a figure against a bound) and the
	// ratios shown beside the rows (no bound).
	Targets []labresult.Target
	// Metrics are the experiment's own figures (Row.Figures): every one a
	// row carries is declared here, with its unit and direction.
	Metrics []labresult.Metric
	// Figures account for every figure and statement of the report
	// (shared/REFERENCE.md): where it is rerun, or why not. "hlab lab
	// --list" shows them, and a run's result lists those not rerun.
	Figures []Figure
	// Setup sets the experiment's setup beside the report's, item by
	// item: versions, configs, schemas, client settings, the load's shape,
	// durations, quotas. An item that differs from the report's says why;
	// one the first claim's rows run with is marked FirstClaim, and what
	// those rows really run with (Run.UsedInFirstClaim) must be ours.
	Setup []labresult.Setup
	// Needs names the dependencies an external server may stand in for
	// (DepPostgres, DepKafka, DepCassandra: hlab lab --postgres, ...).
	Needs []string
	// LogicalReplication: the experiment reads Postgres' logical
	// replication, so an external Postgres needs wal_level=logical.
	LogicalReplication bool
	// SecuredKafka: every Kafka client of the experiment takes
	// Kafka.Security, so it may run against external brokers that need
	// TLS or SASL (External.KafkaSecurity).
	SecuredKafka bool
}

// RowSpec declares one row: its key, its label (how it reads: rewording
// it changes nothing a program computes), and the report's figures for
// it, nil where the report gives none.
type RowSpec struct {
	Key   labresult.Key
	Label string
	Ref   *labresult.Ref
}

// Row declares a row with no figures of the report's.
func Row(key labresult.Key, label string) RowSpec { return RowSpec{Key: key, Label: label} }

// RefRow declares a row beside the report's figures for it.
func RefRow(key labresult.Key, label string, ref *labresult.Ref) RowSpec {
	return RowSpec{Key: key, Label: label, Ref: ref}
}

// Figure is one figure or statement of an experiment's report and how the
// lab covers it: Rerun says where (rows, a claim, a note), or Why says why
// it is not rerun with these options. Exactly one of them is set.
type Figure struct {
	Figure string
	Rerun  string
	Why    string
}

// Rerun is a figure the lab reruns, in where (a row, a claim, a note).
func Rerun(figure, where string) Figure { return Figure{Figure: figure, Rerun: where} }

// NotRerunFigure is a figure the lab does not rerun, and why.
func NotRerunFigure(figure, why string) Figure { return Figure{Figure: figure, Why: why} }

// row returns the declaration of key, nil when the Spec has none.
func (s *Spec) row(key labresult.Key) *RowSpec {
	for i := range s.Rows {
		if s.Rows[i].Key == key {
			return &s.Rows[i]
		}
	}
	return nil
}

// known reports whether name is a standard figure or one of the
// experiment's own.
func (s *Spec) known(name string) bool {
	return labresult.IsStandard(name) || slices.ContainsFunc(s.Metrics, func(m labresult.Metric) bool { return m.Name == name })
}

// Validate checks the Spec is whole and consistent: names and keys
// unique and set, every key a claim, gate or target reads declared,
// every figure they read known, every report figure covered one way.
func (s *Spec) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("lab: experiment %s: "+format, append([]any{s.Name}, args...)...))
	}
	if s.Name == "" || s.Title == "" {
		bad("needs a name and a title")
	}
	keys, labels := map[labresult.Key]bool{}, map[string]bool{}
	for _, r := range s.Rows {
		switch {
		case r.Key == "" || r.Label == "":
			bad("a row needs a key and a label (key %q, label %q)", r.Key, r.Label)
		case keys[r.Key]:
			bad("row key %q declared twice", r.Key)
		case labels[r.Label]:
			bad("row label %q declared twice", r.Label)
		}
		keys[r.Key], labels[r.Label] = true, true
	}
	for _, m := range s.Metrics {
		if labresult.IsStandard(m.Name) {
			bad("figure %q is a standard one: do not declare it", m.Name)
		}
	}
	use := func(what string, ks []labresult.Key, figures ...string) {
		for _, k := range ks {
			if !keys[k] {
				bad("%s reads row %q, which no row declares", what, k)
			}
		}
		for _, f := range figures {
			if f != "" && !s.known(f) {
				bad("%s reads figure %q, which is neither standard nor declared in Metrics", what, f)
			}
		}
	}
	for i, c := range s.Claims {
		if c.Bound.IsZero() {
			bad("claim %d has no bound", i+1)
		}
		figs := []string{c.DenMetric}
		if c.Of == nil {
			figs = append(figs, c.Metric)
		}
		use(fmt.Sprintf("claim %d", i+1), c.Keys(), figs...)
	}
	tkeys := map[labresult.Key]bool{}
	for _, t := range s.Targets {
		what := fmt.Sprintf("target %q", t.Key)
		if t.Key == "" || tkeys[t.Key] {
			bad("%s: a target needs a key of its own", what)
		}
		tkeys[t.Key] = true
		switch {
		case t.Ratio != nil:
			figs := []string{t.Ratio.DenMetric}
			if t.Ratio.Of == nil {
				figs = append(figs, t.Ratio.Metric)
			}
			use(what, t.Keys(), figs...)
		case t.Bound.IsZero():
			bad("%s has neither a bound nor a ratio: a single figure is shown by its row", what)
		default:
			use(what, t.Keys(), t.Metric)
		}
	}
	items := map[string]bool{}
	for _, e := range s.Setup {
		switch {
		case e.Item == "" || e.Report == "" || e.Ours == "":
			bad("setup item %q needs the report's value and ours", e.Item)
		case items[e.Item]:
			bad("setup item %q declared twice", e.Item)
		case e.Differs() && e.Why == "":
			bad("setup item %q differs from the report's and does not say why", e.Item)
		}
		items[e.Item] = true
	}
	for _, f := range s.Figures {
		if (f.Rerun == "") == (f.Why == "") {
			bad("report figure %q needs exactly one of where it is rerun and why it is not", f.Figure)
		}
	}
	return errors.Join(errs...)
}

// setup returns the declaration of item, nil when the Spec has none.
func (s *Spec) setup(item string) *labresult.Setup {
	for i := range s.Setup {
		if s.Setup[i].Item == item {
			return &s.Setup[i]
		}
	}
	return nil
}

// claimsOver returns the claims whose two rows are both among keys.
func claimsOver(claims []labresult.Claim, keys []labresult.Key) []labresult.Claim {
	var out []labresult.Claim
	for _, c := range claims {
		if slices.Contains(keys, c.Num) && slices.Contains(keys, c.Den) {
			out = append(out, c)
		}
	}
	return out
}
