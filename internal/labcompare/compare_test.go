package labcompare

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The fixtures are a lab run of this machine (an earlier version's, cut to the
// claims' rows, one fault row and the dependencies' env) and an edited
// copy of it, b.json, in which:
//   - async #1 moved INCONCLUSIVE → REPRODUCED, nosql #2 NOT REPRODUCED →
//     INCONCLUSIVE;
//   - scale's "one instance, 1 connection" rps moved within A's spread,
//     "three instances + LB, 1 connection" rps outside it, and its p99 was
//     not measured (null);
//   - async lost "databus, 1 connection" and its claim #3, and gained
//     "sync, 2 connections" and "a new claim"; databus did not run;
//   - Go, scale's load balancer and nosql's Postgres differ.
func fixtures(t *testing.T) (a, b labresult.Document) {
	t.Helper()
	a, err := labresult.ReadJSONFile(filepath.Join("testdata", "a.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err = labresult.ReadJSONFile(filepath.Join("testdata", "b.json"))
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func compareFixtures(t *testing.T) *Comparison {
	a, b := fixtures(t)
	return Compare(a, b, "a.json", "b.json")
}

func experiment(t *testing.T, c *Comparison, name string) Experiment {
	t.Helper()
	for _, e := range c.Experiments {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no experiment %q in the comparison", name)
	return Experiment{}
}

func row(t *testing.T, c *Comparison, exp, label string) Row {
	t.Helper()
	for _, r := range experiment(t, c, exp).Rows {
		if r.Label == label {
			return r
		}
	}
	t.Fatalf("%s: no row %q", exp, label)
	return Row{}
}

func figureOf(r Row, key string) *Figure {
	for i := range r.Figures {
		if r.Figures[i].Key == key {
			return &r.Figures[i]
		}
	}
	return nil
}

func TestVerdictMoves(t *testing.T) {
	c := compareFixtures(t)
	want := []Move{
		{Experiment: "async", Kind: "claim", Index: 1, From: "inconclusive", To: "reproduced"},
		{Experiment: "nosql", Kind: "claim", Index: 2, From: "not_reproduced", To: "inconclusive"},
	}
	if len(c.Moved) != len(want) {
		t.Fatalf("moved = %+v, want %d moves", c.Moved, len(want))
	}
	for i, m := range c.Moved {
		w := want[i]
		if m.Experiment != w.Experiment || m.Index != w.Index || m.From != w.From || m.To != w.To || m.Claim == "" {
			t.Errorf("move %d = %+v, want %+v", i, m, w)
		}
	}
	if got, want := c.MovedLine(), "2 verdicts moved: async #1 INCONCLUSIVE → REPRODUCED; nosql #2 NOT REPRODUCED → INCONCLUSIVE"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	cl := experiment(t, c, "async").Claims[0]
	if !cl.Moved || *cl.Change < 1.38 || *cl.Change > 1.40 || *cl.Diff < 0.67 || *cl.Diff > 0.68 || cl.Overlap == nil || !*cl.Overlap {
		t.Errorf("async #1 = %+v (change %v, diff %v)", cl, *cl.Change, *cl.Diff)
	}
	if nosql := experiment(t, c, "nosql").Claims[1]; nosql.Overlap == nil || *nosql.Overlap {
		t.Errorf("nosql #2: intervals [0.43, 0.56] and [0.7, 1.15] reported overlapping")
	}
}

func TestFigureSpread(t *testing.T) {
	c := compareFixtures(t)
	for _, tt := range []struct {
		exp, label, key string
		want            Spread
		missingB        bool
	}{
		{"scale", "one instance, 1 connection", "rps", Within, false},                           // 590 within A's 520–610
		{"scale", "one instance, 1 connection", "p99_ms", Within, false},                        // unchanged
		{"scale", "three instances + LB, 1 connection", "rps", Outside, false},                  // 1100 vs A's 1369–1566, 1416 vs B's 1050–1150
		{"scale", "three instances + LB, 1 connection", "p99_ms", NoSpread, true},               // not measured in B
		{"scale", "one instance, 1 connection", "mean_ms", NoSpread, false},                     // no spread kept for means
		{"replica", "freshness, 1,000 writes/s: replica in the lab", "p99_ms", NoSpread, false}, // one run each
	} {
		t.Run(tt.label+"/"+tt.key, func(t *testing.T) {
			f := figureOf(row(t, c, tt.exp, tt.label), tt.key)
			if f == nil {
				t.Fatal("figure missing")
			}
			if f.Spread != tt.want {
				t.Errorf("spread %q, want %q (A %v B %v, ranges %v %v)", f.Spread, tt.want, fig(f.A), fig(f.B), f.RangeA, f.RangeB)
			}
			if tt.missingB && (f.B != nil || f.Change != nil) {
				t.Errorf("a figure B did not measure got B %v, change %v: never invent one", fig(f.B), fig(f.Change))
			}
		})
	}
}

// TestMissing: a figure neither run measured is not listed; one run
// did not is "—", and no change is computed from it.
func TestMissing(t *testing.T) {
	c := compareFixtures(t)
	fresh := row(t, c, "replica", "freshness, 1,000 writes/s: replica in the lab")
	if f := figureOf(fresh, "rps"); f != nil {
		t.Errorf("rps, null in both runs, listed as %+v", f)
	}
	fault := row(t, c, "replica", "fault: replication connection killed (pg_terminate_backend)")
	if f := figureOf(fault, "rows_differing"); f == nil || *f.A != 0 || *f.Change != 1 {
		t.Errorf("a fault row's rows_differing (0 in both): %+v", f)
	}
	var b bytes.Buffer
	WriteText(&b, c)
	if !regexp.MustCompile(`(?m)^    p99 ms +3\.55 +— +— `).Match(b.Bytes()) {
		t.Errorf("the p99 B did not measure is not shown as —")
	}
}

func TestAddedRemoved(t *testing.T) {
	c := compareFixtures(t)
	for _, tt := range []struct {
		exp, label string
		want       Presence
	}{
		{"async", "sync, 2 connections", Added},
		{"async", "databus, 1 connection", Removed},
		{"async", "sync, 1 connection", Both},
	} {
		if r := row(t, c, tt.exp, tt.label); r.Presence != tt.want {
			t.Errorf("%s %q: %s, want %s", tt.exp, tt.label, r.Presence, tt.want)
		}
	}
	claims := experiment(t, c, "async").Claims
	var got []string
	for _, cl := range claims {
		got = append(got, string(cl.Presence)+" "+cl.Claim[:min(len(cl.Claim), 11)])
	}
	if want := "both producing t, both answering o, removed answering o, added a new claim"; strings.Join(got, ", ") != want {
		t.Errorf("async claims: %s\nwant %s", strings.Join(got, ", "), want)
	}
	if e := experiment(t, c, "databus"); e.Presence != Removed || len(e.Claims) != 4 || e.Claims[0].B != nil {
		t.Errorf("databus: %s with %d claims", e.Presence, len(e.Claims))
	}
	s := c.Summarize()
	if s.ExperimentsRemoved != 1 || s.RowsAdded != 1 || s.ClaimsAdded != 1 || s.ClaimsRemoved != 5 {
		t.Errorf("summary %+v", s)
	}
}

func TestEnvDifferences(t *testing.T) {
	c := compareFixtures(t)
	var got []string
	for _, d := range c.Env {
		got = append(got, d.Experiment+"/"+d.Key+": "+orMissing(d.A)+" → "+orMissing(d.B))
	}
	want := []string{
		"/go: go1.26.8 → go1.26.9",
		"scale/lb: nginx 1.22.1 → builtin",
		"nosql/postgres: postgres 15.18, 1 CPU (quota), no memory limit, durable → postgres 16.4, 1 CPU (quota), no memory limit, durable",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("env differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestText pins the terminal rendering: verdict moves first, then what
// was added or removed, the environment, and the tables.
func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, compareFixtures(t)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if lines[3] != "2 verdicts moved: async #1 INCONCLUSIVE → REPRODUCED; nosql #2 NOT REPRODUCED → INCONCLUSIVE" {
		t.Errorf("the summary does not open with the moves:\n%s", strings.Join(lines[:6], "\n"))
	}
	for _, want := range []string{
		"MOVED INCONCLUSIVE → REPRODUCED",
		"within spread", "OUTSIDE spread",
		"[added: only in B; 1 run]", "[removed: only in A; 1 run]", "removed: REPRODUCED", "added: REPRODUCED",
		"databus: gRPC", "[removed: only in A]",
		"machine: go: go1.26.8 → go1.26.9", "scale: lb: nginx 1.22.1 → builtin",
		"1 of 41 changed outside it",
		`  OUTSIDE spread: scale "three instances + LB, 1 connection" rps 1416 → 1100 (B/A 0.777)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q", want)
		}
	}
	if env, first := strings.Index(out, "Environment differences"), strings.Index(out, "\nscale: "); env < 0 || env > first {
		t.Errorf("the environment's differences do not come before the experiments")
	}
	golden(t, "compare.txt", b.Bytes())
}

// TestSameRun: a run compared with itself moves nothing, adds nothing,
// and every figure's change is 1 and within its spread.
func TestSameRun(t *testing.T) {
	a, _ := fixtures(t)
	checkSame(t, Compare(a, a, "a", "a"))
}

func checkSame(t *testing.T, c *Comparison) {
	t.Helper()
	if len(c.Moved) != 0 || len(c.Env) != 0 {
		t.Errorf("moved %v, env %v", c.Moved, c.Env)
	}
	s := c.Summarize()
	if s.RowsAdded+s.RowsRemoved+s.ClaimsAdded+s.ClaimsRemoved+s.ExperimentsAdded+s.ExperimentsRemoved+s.OutsideSpread != 0 || s.WithinSpread == 0 {
		t.Errorf("summary %+v", s)
	}
	for _, e := range c.Experiments {
		for _, r := range e.Rows {
			for _, f := range r.Figures {
				if (f.A == nil) != (f.B == nil) || (f.Change != nil && *f.Change != 1) {
					t.Errorf("%s %q %s: A %s B %s change %s", e.Name, r.Label, f.Key, fig(f.A), fig(f.B), fig(f.Change))
				}
			}
		}
	}
	var b bytes.Buffer
	WriteText(&b, c)
	if !strings.Contains(b.String(), "No verdict moved") || strings.Contains(b.String(), "OUTSIDE") || strings.Contains(b.String(), "MOVED") {
		t.Errorf("a run against itself:\n%s", b.String())
	}
}

// TestRealRun compares a whole lab run (HLAB_LAB_JSON, e.g. a `hlab lab
// --json` file of this machine; the fixture when unset) with itself and
// with a copy edited here: a claim's verdict moved, a row's rps halved, a
// row dropped.
func TestRealRun(t *testing.T) {
	path := cmpOr(os.Getenv("HLAB_LAB_JSON"), filepath.Join("testdata", "a.json"))
	t.Logf("comparing %s", path)
	a, err := labresult.ReadJSONFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := labresult.ReadJSONFile(path)
	checkSame(t, Compare(a, b, path, path))

	last := b.Experiments[len(b.Experiments)-1]
	cl := &last.Claims[0]
	from := cl.Verdict
	cl.Verdict = map[labresult.Verdict]labresult.Verdict{labresult.Reproduced: labresult.Inconclusive}[from]
	if cl.Verdict == "" {
		cl.Verdict = labresult.Reproduced
	}
	var halved *labresult.Row
	for _, r := range b.Experiments[0].Rows {
		if r.RPS != nil && r.Runs > 1 && halved == nil {
			halved = r
			*r.RPS, *r.RPSMin, *r.RPSMax = *r.RPS/2, *r.RPSMin/2, *r.RPSMax/2
		}
	}
	dropped := b.Experiments[0].Rows[len(b.Experiments[0].Rows)-1]
	b.Experiments[0].Rows = b.Experiments[0].Rows[:len(b.Experiments[0].Rows)-1]
	c := Compare(a, b, "a", "b")
	if len(c.Moved) != 1 || c.Moved[0].Experiment != last.Name || c.Moved[0].From != string(from) {
		t.Errorf("moved = %+v, want %s #1 from %s", c.Moved, last.Name, from)
	}
	if halved == nil {
		t.Fatal("no row with a spread in the first experiment")
	}
	if f := figureOf(row(t, c, b.Experiments[0].Name, halved.Label), "rps"); f.Spread != Outside || *f.Change != 0.5 {
		t.Errorf("halved rps: %+v", f)
	}
	if r := row(t, c, b.Experiments[0].Name, dropped.Label); r.Presence != Removed {
		t.Errorf("dropped row: %s", r.Presence)
	}
	var out bytes.Buffer
	WriteText(&out, c)
	if !strings.HasPrefix(strings.Split(out.String(), "\n")[3], "1 verdict moved: "+last.Name+" #1") {
		t.Errorf("text:\n%s", out.String()[:500])
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestHTML(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cmp")
	path, err := WriteHTML(dir, compareFixtures(t))
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "compare.html") {
		t.Errorf("wrote %s", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		"2 verdicts moved: async #1 INCONCLUSIVE → REPRODUCED; nosql #2 NOT REPRODUCED → INCONCLUSIVE",
		`<tr class="moved">`, `<b>MOVED</b> <span class="verdict inconclusive">INCONCLUSIVE</span> → <span class="verdict reproduced">REPRODUCED</span>`,
		`class="outside">OUTSIDE spread`, `class="within">within spread`,
		"[added: only in B; 1 run]", "[removed: only in A]", "go1.26.9", "nginx 1.22.1", "—",
		".reproduced,.holds{background:#d9f2d9", // the lab report's style, shared
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Self-contained, and no markup escaped as text (a threshold's "<="
	// in a tooltip is text, and escaped).
	own := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"<script src", "<link ", "http://", "https://"} {
		if strings.Contains(own, bad) {
			t.Errorf("page has %q", bad)
		}
	}
	if m := regexp.MustCompile(`&lt;/?[a-z]`).FindString(page); m != "" {
		t.Errorf("page has markup escaped as text: %q", m)
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(compareFixtures(t))
	if err != nil {
		t.Fatal(err)
	}
	var back Comparison
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Moved) != 2 || len(back.Env) != 3 {
		t.Errorf("round trip: moved %d, env %d", len(back.Moved), len(back.Env))
	}
	if !bytes.Contains(b, []byte(`"key":"p99_ms","a":3.5469999999999997,"b":null,"change":null`)) {
		t.Errorf("a figure B did not measure is not null in JSON")
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got, *update)
}

// TestFailedRun: an experiment that failed in B shows its error, and its
// claims, invalid there, count as moved.
func TestFailedRun(t *testing.T) {
	a, _ := fixtures(t)
	b, _ := fixtures(t)
	scale := b.Experiments[0]
	scale.Error = "nginx did not start"
	for i := range scale.Claims {
		scale.Claims[i].Verdict, scale.Claims[i].Ratio, scale.Claims[i].CI, scale.Claims[i].Pairs = labresult.Invalid, nil, nil, 0
	}
	scale.Rows = nil
	c := Compare(a, b, "a", "b")
	if len(c.Moved) != 2 || c.Moved[0].To != string(labresult.Invalid) {
		t.Fatalf("moved %+v", c.Moved)
	}
	var out bytes.Buffer
	WriteText(&out, c)
	for _, want := range []string{"FAILED in B: nginx did not start", "MOVED REPRODUCED → INVALID", "scale #1 REPRODUCED → INVALID", "4 rows removed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
	if cl := experiment(t, c, "scale").Claims[0]; cl.Change != nil || cl.Diff != nil || cl.Overlap != nil {
		t.Errorf("a claim with no ratio in B got a change: %+v", cl)
	}
}

// TestVerdictChart pins the chart of every claim, A's panel beside B's,
// and checks that each claim the comparison matched has its line, with
// a drawn claim in each run that has it and "not in this run" in the
// other, and its label in bold when its verdict moved.
func TestVerdictChart(t *testing.T) {
	c := compareFixtures(t)
	svg := string(verdictChart(c))
	lines := strings.Split(svg, `<g class="line">`)[1:]
	var want []*Claim
	for _, e := range c.Experiments {
		for i := range e.Claims {
			want = append(want, &e.Claims[i])
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines for %d claims", len(lines), len(want))
	}
	drawn := regexp.MustCompile(`<g class="claim ([a-z-]+)">|italic">not in this run<`)
	for i, cl := range want {
		var got []string
		for _, m := range drawn.FindAllStringSubmatch(lines[i], -1) {
			got = append(got, cmpOr(m[1], "absent"))
		}
		var panels []string
		for _, s := range []*labresult.ClaimResult{cl.A, cl.B} {
			if s == nil {
				panels = append(panels, "absent")
			} else {
				panels = append(panels, strings.ReplaceAll(string(s.Verdict), "_", "-"))
			}
		}
		if strings.Join(got, " ") != strings.Join(panels, " ") {
			t.Errorf("claim %d (%s): panels %v, want %v", i, cl.Claim, got, panels)
		}
		if bold := strings.Contains(lines[i], `text-anchor="end" font-weight="bold"`); bold != cl.Moved {
			t.Errorf("claim %d (%s): label bold %v, moved %v", i, cl.Claim, bold, cl.Moved)
		}
	}
	golden(t, "verdicts.svg", []byte(svg+"\n"))
}

// TestSetupChanges: setup items are matched by item; one whose value
// (ours or the report's) changed between the runs is shown as changed,
// with both values, and counted; added and removed items are counted.
func TestSetupChanges(t *testing.T) {
	doc := func(setup ...labresult.Setup) labresult.Document {
		return labresult.Document{Experiments: []*labresult.Result{{Name: "scale", Setup: setup}}}
	}
	nginxA := labresult.Setup{Item: "nginx config", Report: "defaults", Ours: "keepalive 64", Why: "cheaper", FirstClaim: true}
	nginxB := labresult.Setup{Item: "nginx config", Report: "defaults", Ours: "defaults", FirstClaim: true}
	same := labresult.Setup{Item: "quota", Report: "0.2 CPU", Ours: "0.2 CPU", FirstClaim: true}
	c := Compare(doc(nginxA, same, labresult.Setup{Item: "go", Report: "1.16", Ours: "1.26", Why: "here"}),
		doc(nginxB, same, labresult.Setup{Item: "work", Report: "[]rune", Ours: "[]rune"}), "a", "b")
	var got []string
	for _, s := range experiment(t, c, "scale").Setup {
		got = append(got, fmt.Sprintf("%s %s %v", s.Item, s.Presence, s.Changed))
	}
	if want := "nginx config both true, quota both false, go removed false, work added false"; strings.Join(got, ", ") != want {
		t.Errorf("setup: %s\nwant %s", strings.Join(got, ", "), want)
	}
	var b strings.Builder
	if err := WriteText(&b, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Setup items run differently in B: 1.", "1 setup item added, 1 setup item removed",
		"setup, changed: A ! nginx config: report defaults; ours keepalive 64", "B = nginx config: defaults (as the report)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
