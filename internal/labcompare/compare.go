// Package labcompare compares two lab runs (hlab lab --json files) claim
// by claim and row by row: what a user reads before and after a change to
// see which verdicts moved, which figures changed beyond their
// run-to-run spread, and what in the environment differs. Rows, claims
// and targets are matched by their keys (by label or text when a run
// predates keys), so rewording a label moves nothing. It reads the files
// with labresult.ReadJSONFile and renders text and HTML with the report
// package's table and style.
//
//	a, _ := labresult.ReadJSONFile("before.json")
//	b, _ := labresult.ReadJSONFile("after.json")
//	c := labcompare.Compare(a, b, "before.json", "after.json")
//	labcompare.WriteText(os.Stdout, c)
package labcompare

import (
	"fmt"
	"slices"
	"strings"

	"github.com/highload-lab/hlab/internal/labresult"
)

// Presence says in which of the two runs a thing is.
type Presence string

const (
	// Both: in A and in B.
	Both Presence = "both"
	// Added: only in B.
	Added Presence = "added"
	// Removed: only in A.
	Removed Presence = "removed"
)

// Spread says whether a figure's change is within the run-to-run spread
// (min to max over a row's runs) of either run.
type Spread string

const (
	// NoSpread: neither run measured the row more than once, or a value
	// is missing, so there is no spread to read the change against.
	NoSpread Spread = ""
	// Within: B's median lies within A's min–max, or A's within B's: the
	// change is no larger than the noise between runs.
	Within Spread = "within"
	// Outside: a run has a spread and neither median lies within the
	// other's.
	Outside Spread = "outside"
)

// Comparison is two lab runs side by side.
type Comparison struct {
	A string `json:"a"`
	B string `json:"b"`
	// Env lists what differs in the machine and the experiments'
	// environments: first, since it explains changes in the figures.
	Env []EnvDiff `json:"env"`
	// Moved lists the claims and targets in both runs whose verdict
	// differs.
	Moved       []Move       `json:"moved"`
	Experiments []Experiment `json:"experiments"`
}

// EnvDiff is one environment entry that differs; a nil side is absent.
type EnvDiff struct {
	// Experiment is empty for the machine.
	Experiment string  `json:"experiment,omitempty"`
	Key        string  `json:"key"`
	A          *string `json:"a"`
	B          *string `json:"b"`
}

// Move is a claim or a target whose verdict moved from A to B.
type Move struct {
	Experiment string `json:"experiment"`
	// Kind is "claim" or "target".
	Kind  string `json:"kind"`
	Index int    `json:"index"` // a claim's, 1-based, as the lab numbers claims
	Key   string `json:"key"`   // a target's
	Claim string `json:"claim"` // the claim's or target's text
	From  string `json:"from"`
	To    string `json:"to"`
}

func (m Move) String() string {
	what := fmt.Sprintf("#%d", m.Index)
	if m.Kind == "target" {
		what = "target " + m.Key
	}
	return fmt.Sprintf("%s %s %s → %s", m.Experiment, what, Word(m.From), Word(m.To))
}

// Word is a verdict, a claim's or a target's, as tables print it.
func Word(v string) string { return strings.ToUpper(strings.ReplaceAll(v, "_", " ")) }

// Experiment compares one experiment's claims and rows.
type Experiment struct {
	Name     string   `json:"name"`
	Title    string   `json:"title"`
	Presence Presence `json:"presence"`
	// ErrorA and ErrorB are the experiment's failure in each run.
	ErrorA  string   `json:"error_a,omitempty"`
	ErrorB  string   `json:"error_b,omitempty"`
	Claims  []Claim  `json:"claims"`
	Targets []Target `json:"targets"`
	Rows    []Row    `json:"rows"`
	// NotRerun lists the report figures not rerun in either run.
	NotRerun []NotRerun `json:"not_rerun"`
	// Setup lists the setup items declared in either run, matched by
	// item: what the two runs ran differently.
	Setup []Setup `json:"setup,omitempty"`
}

// Setup compares one setup item, matched by its name; Changed: the
// report's value, ours or whether the first claim's rows run it differ.
type Setup struct {
	Item     string           `json:"item"`
	Presence Presence         `json:"presence"`
	A        *labresult.Setup `json:"a"`
	B        *labresult.Setup `json:"b"`
	Changed  bool             `json:"changed"`
}

// Target compares one target, matched by its key.
type Target struct {
	Key      string                  `json:"key"`
	Target   string                  `json:"target"`
	Presence Presence                `json:"presence"`
	A        *labresult.TargetResult `json:"a"`
	B        *labresult.TargetResult `json:"b"`
	Moved    bool                    `json:"moved"`
}

// NotRerun is a report figure not rerun, matched by its text; Why is
// B's reason (A's when removed).
type NotRerun struct {
	Figure   string   `json:"figure"`
	Why      string   `json:"why"`
	Presence Presence `json:"presence"`
}

// Claim compares one claim, matched by its key (by its text when a run
// predates claim keys).
type Claim struct {
	Claim    string   `json:"claim"`
	Index    int      `json:"index"` // 1-based, in B (in A when removed)
	Presence Presence `json:"presence"`
	// A and B are the claim's result in each run, nil where it is not.
	A *labresult.ClaimResult `json:"a"`
	B *labresult.ClaimResult `json:"b"`
	// Change is B's ratio over A's, Diff B's minus A's; nil when either
	// is missing.
	Change *float64 `json:"change"`
	Diff   *float64 `json:"diff"`
	// Overlap says whether the two confidence intervals overlap; nil
	// when either run has none.
	Overlap *bool `json:"overlap"`
	Moved   bool  `json:"moved"`
}

// Row compares one row, matched by its key (by its label when a run
// predates row keys); Label is B's (A's when removed).
type Row struct {
	Key      labresult.Key `json:"key,omitempty"`
	Label    string        `json:"label"`
	Presence Presence      `json:"presence"`
	RunsA    int           `json:"runs_a"`
	RunsB    int           `json:"runs_b"`
	// Figures lists the figures measured in either run.
	Figures []Figure `json:"figures"`
}

// Figure compares one figure of a row.
type Figure struct {
	// Key is the row's JSON field (rps, p99_ms, ...).
	Key string   `json:"key"`
	A   *float64 `json:"a"`
	B   *float64 `json:"b"`
	// Change is B over A; nil when either is missing or A is 0.
	Change *float64 `json:"change"`
	Spread Spread   `json:"spread,omitempty"`
	// RangeA and RangeB are each run's [min, max] over more than one run.
	RangeA []float64 `json:"range_a,omitempty"`
	RangeB []float64 `json:"range_b,omitempty"`
}

// FigureName is how tables name a figure.
func FigureName(key string) string { return labresult.Title(key) }

// Compare compares run b with run a; nameA and nameB name them in the
// output (their files).
func Compare(a, b labresult.Document, nameA, nameB string) *Comparison {
	c := &Comparison{A: nameA, B: nameB, Env: machineDiff(a.Machine, b.Machine), Moved: []Move{}}
	pairs := match(a.Experiments, b.Experiments, func(r *labresult.Result) string { return r.Name })
	for _, p := range pairs {
		ea, eb := p.a, p.b
		e := Experiment{Presence: p.presence()}
		if ea != nil {
			e.Name, e.Title, e.ErrorA = ea.Name, ea.Title, ea.Error
		}
		if eb != nil {
			e.Name, e.Title, e.ErrorB = eb.Name, eb.Title, eb.Error
		}
		if ea != nil && eb != nil {
			c.Env = append(c.Env, envDiff(e.Name, ea, eb)...)
		}
		e.Claims = compareClaims(orNil(ea, func(r *labresult.Result) []labresult.ClaimResult { return r.Claims }), orNil(eb, func(r *labresult.Result) []labresult.ClaimResult { return r.Claims }))
		for _, cl := range e.Claims {
			if cl.Moved {
				c.Moved = append(c.Moved, Move{Experiment: e.Name, Kind: "claim", Index: cl.Index, Claim: cl.Claim, From: string(cl.A.Verdict), To: string(cl.B.Verdict)})
			}
		}
		e.Targets = compareTargets(orNil(ea, func(r *labresult.Result) []labresult.TargetResult { return r.Targets }), orNil(eb, func(r *labresult.Result) []labresult.TargetResult { return r.Targets }))
		for _, t := range e.Targets {
			if t.Moved {
				c.Moved = append(c.Moved, Move{Experiment: e.Name, Kind: "target", Key: t.Key, Claim: t.Target, From: string(t.A.Verdict), To: string(t.B.Verdict)})
			}
		}
		e.Rows = compareRows(orNil(ea, func(r *labresult.Result) []*labresult.Row { return r.Rows }), orNil(eb, func(r *labresult.Result) []*labresult.Row { return r.Rows }))
		e.NotRerun = compareNotRerun(orNil(ea, func(r *labresult.Result) []labresult.NotRerun { return r.NotRerun }), orNil(eb, func(r *labresult.Result) []labresult.NotRerun { return r.NotRerun }))
		e.Setup = compareSetup(orNil(ea, func(r *labresult.Result) []labresult.Setup { return r.Setup }), orNil(eb, func(r *labresult.Result) []labresult.Setup { return r.Setup }))
		c.Experiments = append(c.Experiments, e)
	}
	return c
}

func orNil[T any](r *labresult.Result, get func(*labresult.Result) []T) []T {
	if r == nil {
		return nil
	}
	return get(r)
}

// pair is one thing matched across the runs; a nil side is absent.
type pair[T any] struct {
	a, b   T
	inA    bool
	inB    bool
	ia, ib int // positions, 0-based
}

func (p pair[T]) presence() Presence {
	switch {
	case p.inA && p.inB:
		return Both
	case p.inB:
		return Added
	}
	return Removed
}

// match pairs items of a and b by key, the n-th occurrence of a key in a
// with its n-th in b (a label may repeat): A's order, then what only B has.
func match[T any](a, b []T, key func(T) string) []pair[T] {
	type ref struct {
		key string
		n   int
	}
	refOf := func(items []T) []ref {
		seen := map[string]int{}
		out := make([]ref, len(items))
		for i, it := range items {
			k := key(it)
			out[i] = ref{k, seen[k]}
			seen[k]++
		}
		return out
	}
	ra, rb := refOf(a), refOf(b)
	inB := map[ref]int{}
	for i, r := range rb {
		inB[r] = i
	}
	var out []pair[T]
	used := make([]bool, len(b))
	for i, r := range ra {
		p := pair[T]{a: a[i], inA: true, ia: i}
		if j, ok := inB[r]; ok {
			p.b, p.inB, p.ib, used[j] = b[j], true, j, true
		}
		out = append(out, p)
	}
	for j := range b {
		if !used[j] {
			out = append(out, pair[T]{b: b[j], inB: true, ib: j})
		}
	}
	return out
}

func machineDiff(a, b labresult.Machine) []EnvDiff {
	out := []EnvDiff{}
	for _, kv := range []struct{ key, a, b string }{
		{"cpus", fmt.Sprint(a.CPUs), fmt.Sprint(b.CPUs)},
		{"cpu_quota", a.CPUQuota, b.CPUQuota},
		{"go", a.Go, b.Go},
		{"os", a.OS, b.OS},
		{"cpu_model", a.CPUModel, b.CPUModel},
		{"kernel", a.Kernel, b.Kernel},
	} {
		if kv.a != kv.b {
			out = append(out, EnvDiff{Key: kv.key, A: present(kv.a), B: present(kv.b)})
		}
	}
	return out
}

func present(s string) *string {
	if s == "" || s == "0" {
		return nil
	}
	return &s
}

// envDiff lists the entries of two experiments' env (and their mode)
// that differ, in key order.
func envDiff(name string, a, b *labresult.Result) []EnvDiff {
	var out []EnvDiff
	if a.Mode != b.Mode {
		out = append(out, EnvDiff{Experiment: name, Key: "mode", A: present(string(a.Mode)), B: present(string(b.Mode))})
	}
	var keys []string
	for k := range a.Env {
		keys = append(keys, k)
	}
	for k := range b.Env {
		if _, ok := a.Env[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, okA := a.Env[k]
		vb, okB := b.Env[k]
		if va == vb && okA == okB {
			continue
		}
		d := EnvDiff{Experiment: name, Key: k}
		if okA {
			d.A = &va
		}
		if okB {
			d.B = &vb
		}
		out = append(out, d)
	}
	return out
}

// keyed returns key when every item of a and b has one, else fallback:
// runs from before keys existed are matched by their text.
func keyed[T any](a, b []T, key, fallback func(T) string) func(T) string {
	for _, items := range [][]T{a, b} {
		for _, it := range items {
			if key(it) == "" {
				return fallback
			}
		}
	}
	return key
}

func compareClaims(a, b []labresult.ClaimResult) []Claim {
	var out []Claim
	by := keyed(a, b, func(c labresult.ClaimResult) string { return c.Key }, func(c labresult.ClaimResult) string { return c.Claim })
	for _, p := range match(a, b, by) {
		c := Claim{Presence: p.presence()}
		if p.inA {
			c.Claim, c.Index, c.A = p.a.Claim, p.ia+1, &p.a
		}
		if p.inB {
			c.Claim, c.Index, c.B = p.b.Claim, p.ib+1, &p.b
		}
		if c.A != nil && c.B != nil {
			c.Moved = c.A.Verdict != c.B.Verdict
			c.Change = ratio(c.A.Ratio, c.B.Ratio)
			if c.A.Ratio != nil && c.B.Ratio != nil {
				c.Diff = labresult.F(*c.B.Ratio - *c.A.Ratio)
			}
			if len(c.A.CI) == 2 && len(c.B.CI) == 2 {
				overlap := c.A.CI[0] <= c.B.CI[1] && c.B.CI[0] <= c.A.CI[1]
				c.Overlap = &overlap
			}
		}
		out = append(out, c)
	}
	return out
}

// ratio is b/a, nil when either is missing or a is 0 (1 when both are 0).
func ratio(a, b *float64) *float64 {
	switch {
	case a == nil || b == nil:
		return nil
	case *a == 0 && *b == 0:
		return labresult.F(1)
	case *a == 0:
		return nil
	}
	return labresult.F(*b / *a)
}

func compareTargets(a, b []labresult.TargetResult) []Target {
	var out []Target
	for _, p := range match(a, b, func(t labresult.TargetResult) string { return string(t.Key) }) {
		t := Target{Presence: p.presence()}
		if p.inA {
			t.Key, t.Target, t.A = string(p.a.Key), p.a.Target, &p.a
		}
		if p.inB {
			t.Key, t.Target, t.B = string(p.b.Key), p.b.Target, &p.b
		}
		t.Moved = t.A != nil && t.B != nil && t.A.Verdict != t.B.Verdict
		out = append(out, t)
	}
	return out
}

func compareNotRerun(a, b []labresult.NotRerun) []NotRerun {
	var out []NotRerun
	for _, p := range match(a, b, func(n labresult.NotRerun) string { return n.Figure }) {
		n := NotRerun{Presence: p.presence()}
		if p.inA {
			n.Figure, n.Why = p.a.Figure, p.a.Why
		}
		if p.inB {
			n.Figure, n.Why = p.b.Figure, p.b.Why
		}
		out = append(out, n)
	}
	return out
}

func compareSetup(a, b []labresult.Setup) []Setup {
	var out []Setup
	for _, p := range match(a, b, func(s labresult.Setup) string { return s.Item }) {
		s := Setup{Presence: p.presence()}
		if p.inA {
			s.Item, s.A = p.a.Item, &p.a
		}
		if p.inB {
			s.Item, s.B = p.b.Item, &p.b
		}
		s.Changed = s.A != nil && s.B != nil && (labresult.SetupText(s.A.Report) != labresult.SetupText(s.B.Report) ||
			labresult.SetupText(s.A.Ours) != labresult.SetupText(s.B.Ours) || s.A.FirstClaim != s.B.FirstClaim)
		out = append(out, s)
	}
	return out
}

func compareRows(a, b []*labresult.Row) []Row {
	var out []Row
	by := keyed(a, b, func(r *labresult.Row) string { return string(r.Key) }, func(r *labresult.Row) string { return r.Label })
	for _, p := range match(a, b, by) {
		row := Row{Presence: p.presence()}
		if p.inA {
			row.Key, row.Label, row.RunsA = p.a.Key, p.a.Label, p.a.Runs
		}
		if p.inB {
			row.Key, row.Label, row.RunsB = p.b.Key, p.b.Label, p.b.Runs
		}
		for _, m := range labresult.Compared() {
			fig := Figure{Key: m.Name}
			var rangeA, rangeB []float64
			if p.inA {
				fig.A, rangeA = p.a.Figure(m.Name), spreadOf(p.a, m.Name)
			}
			if p.inB {
				fig.B, rangeB = p.b.Figure(m.Name), spreadOf(p.b, m.Name)
			}
			if fig.A == nil && fig.B == nil {
				continue
			}
			fig.Change = ratio(fig.A, fig.B)
			fig.RangeA, fig.RangeB = rangeA, rangeB
			fig.Spread = spread(fig.A, fig.B, fig.RangeA, fig.RangeB)
			row.Figures = append(row.Figures, fig)
		}
		out = append(out, row)
	}
	return out
}

// spreadOf is a row's figure's range over its runs, nil without one.
func spreadOf(r *labresult.Row, name string) []float64 {
	if lo, hi, ok := r.Spread(name); ok {
		return []float64{lo, hi}
	}
	return nil
}

// spread reads a change against the runs' spreads: within when either
// median lies in the other run's min–max.
func spread(a, b *float64, ra, rb []float64) Spread {
	if a == nil || b == nil || (ra == nil && rb == nil) {
		return NoSpread
	}
	in := func(v float64, r []float64) bool { return r != nil && r[0] <= v && v <= r[1] }
	if in(*b, ra) || in(*a, rb) {
		return Within
	}
	return Outside
}
