package lab_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labcompare"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/report"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// experiment is an experiment made of a function, for these tests: two
// rows, a and b, and the claim a >= 2x b. labelA, when set, rewords a's
// label.
type experiment struct {
	run    func(ctx context.Context, r *lab.Run) error
	labelA string
}

func (e experiment) Spec(lab.Options) lab.Spec {
	return lab.Spec{Name: "gate", Title: "an integrity gate",
		Rows:    []lab.RowSpec{lab.Row("a", cmp.Or(e.labelA, "row a")), lab.Row("b", "row b")},
		Claims:  []labresult.Claim{{Text: "a serves >= 2x b", Ratio: labresult.Ratio{Num: "a", Den: "b", Metric: "rps"}, Bound: labresult.AtLeast(2)}},
		Metrics: []labresult.Metric{{Name: "declared"}},
		Setup: []labresult.Setup{
			{Item: "config", Report: "keepalive off", Ours: "keepalive off", FirstClaim: true},
			{Item: "version", Report: "14", Ours: "15", Why: "the one installed here", FirstClaim: true},
			{Item: "history index", Report: "none", Ours: "(user_id, ts)", Why: "ours, in later rows"},
		}}
}
func (experiment) Estimate(lab.Options) time.Duration          { return time.Second }
func (e experiment) Run(ctx context.Context, r *lab.Run) error { return e.run(ctx, r) }

// steadyDriver answers rate requests per second, all successful, and
// reports lost messages when lost > 0; before each run it calls before.
type steadyDriver struct {
	rate   float64
	lost   int64
	before func()
}

func (d steadyDriver) Drive(_ context.Context, dur time.Duration, window func(bool)) (*lab.Sample, error) {
	window(true)
	if d.before != nil {
		d.before()
	}
	time.Sleep(10 * time.Millisecond)
	window(false)
	n := int64(d.rate * dur.Seconds())
	s := &lab.Sample{Model: "closed", Connections: 1, Window: dur, Requests: n, Successes: n,
		Latency: loadgen.Latencies{Mean: time.Millisecond, P99: time.Millisecond}}
	if d.lost > 0 {
		s.Lost = &d.lost
	}
	return s, nil
}

// judge runs exp through the lab as "hlab lab" does and renders it: the
// claim must be INVALID in the JSON and the text, with a reason that
// contains why.
func judge(t *testing.T, sb *sandbox.Sandbox, exp experiment, why string) {
	t.Helper()
	results := runAll(t, sb, exp)
	var text bytes.Buffer
	report.WriteScoreboard(&text, results)
	report.WriteText(&text, results[0])
	path := filepath.Join(t.TempDir(), "r.json")
	if err := labresult.WriteJSONFile(path, labresult.Document{Experiments: results}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var doc struct {
		Experiments []struct {
			Verdict    string `json:"verdict"`
			Reproduced bool   `json:"reproduced"`
			Claims     []struct {
				Verdict string `json:"verdict"`
				Why     string `json:"why"`
			} `json:"claims"`
		} `json:"experiments"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	e := doc.Experiments[0]
	if e.Verdict != "invalid" || e.Reproduced || len(e.Claims) != 1 || e.Claims[0].Verdict != "invalid" || !strings.Contains(e.Claims[0].Why, why) {
		t.Errorf("JSON: verdict %q reproduced %v claims %+v; want invalid because %q", e.Verdict, e.Reproduced, e.Claims, why)
	}
	if !strings.Contains(text.String(), "INVALID") || !strings.Contains(text.String(), why) {
		t.Errorf("text lacks INVALID and %q:\n%s", why, text.String())
	}
}

func runAll(t *testing.T, sb *sandbox.Sandbox, exp lab.Experiment) []*labresult.Result {
	t.Helper()
	results, err := lab.RunAll(context.Background(), []lab.Experiment{exp},
		lab.Options{Mode: lab.Quick, Short: true, WorkDir: t.TempDir(), Self: "/bin/true"}, sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	return results
}

// paired measures a (numerator) and b in pairs; a is three times faster.
func paired(ctx context.Context, r *lab.Run, a, b lab.Measurement) error {
	a.Key, b.Key = "a", "b"
	rows, err := r.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{a, b}})
	for _, row := range rows {
		r.AddRow(row)
	}
	return err
}

func TestGateLostMessage(t *testing.T) {
	judge(t, nil, experiment{run: func(ctx context.Context, r *lab.Run) error {
		return paired(ctx, r,
			lab.Measurement{Driver: steadyDriver{rate: 3000, lost: 1}},
			lab.Measurement{Driver: steadyDriver{rate: 1000}})
	}}, "lost 3 acknowledged")
}

func TestGateFailedRequests(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%20 == 0 { // 5% fail
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	judge(t, nil, experiment{run: func(ctx context.Context, r *lab.Run) error {
		return paired(ctx, r,
			lab.Measurement{Driver: lab.HTTP{URL: srv.URL, Load: []loadgen.Option{loadgen.Connections(2)}}},
			lab.Measurement{Driver: steadyDriver{rate: 10}})
	}}, "below its bound of 99.00%")
}

func TestGateServiceDied(t *testing.T) {
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	judge(t, sb, experiment{run: func(ctx context.Context, r *lab.Run) error {
		p, err := sb.Start(ctx, sandbox.Spec{Name: "victim", Path: "sleep", Args: []string{"60"}})
		if err != nil {
			return err
		}
		defer p.Stop(time.Second)
		rounds := 0
		kill := func() { // in the second round, for real
			if rounds++; rounds == 2 {
				syscall.Kill(p.PID(), syscall.SIGKILL)
				<-p.Done()
			}
		}
		return paired(ctx, r,
			lab.Measurement{Driver: steadyDriver{rate: 3000, before: kill}, Procs: []*sandbox.Process{p}},
			lab.Measurement{Driver: steadyDriver{rate: 1000}})
	}}, "had a service die: victim")
}

func TestGateNoQuota(t *testing.T) {
	sb := sandbox.Unlimited("tests: no cgroups")
	defer sb.Close()
	judge(t, sb, experiment{run: func(ctx context.Context, r *lab.Run) error {
		p, err := sb.Start(ctx, sandbox.Spec{Name: "unlimited", Path: "sleep", Args: []string{"60"}, CPU: 0.5})
		if err != nil {
			return err
		}
		defer p.Stop(time.Second)
		return paired(ctx, r,
			lab.Measurement{Driver: steadyDriver{rate: 3000}, Procs: []*sandbox.Process{p}},
			lab.Measurement{Driver: steadyDriver{rate: 1000}})
	}}, "ran without its CPU quota: unlimited asked for 0.5 CPU")
}

// TestRenamedLabelStillJudged: rewording a row's label in the Spec
// changes nothing the lab computes: the claim is judged on the same
// rows, which carry the new label, and "hlab lab compare" matches the
// row across the two runs by its key.
func TestRenamedLabelStillJudged(t *testing.T) {
	run := func(ctx context.Context, r *lab.Run) error {
		return paired(ctx, r, lab.Measurement{Driver: steadyDriver{rate: 3000}}, lab.Measurement{Driver: steadyDriver{rate: 1000}})
	}
	before := runAll(t, nil, experiment{run: run})
	after := runAll(t, nil, experiment{run: run, labelA: "row a, reworded"})
	for _, res := range [][]*labresult.Result{before, after} {
		if c := res[0].Claims[0]; c.Verdict != labresult.Reproduced {
			t.Fatalf("claim %s over %q (%s)", c.Verdict, c.Numerator, c.Why)
		}
	}
	if got := after[0].Claims[0].Numerator; got != "row a, reworded" {
		t.Errorf("the claim reads %q, want the new label", got)
	}
	c := labcompare.Compare(labresult.Document{Experiments: before}, labresult.Document{Experiments: after}, "before", "after")
	for _, row := range c.Experiments[0].Rows {
		if row.Presence != labcompare.Both {
			t.Errorf("row %q (%s) is %s: compare must match it by key", row.Label, row.Key, row.Presence)
		}
	}
	if len(c.Moved) != 0 || c.Experiments[0].Claims[0].Presence != labcompare.Both {
		t.Errorf("moved %v, claim %s", c.Moved, c.Experiments[0].Claims[0].Presence)
	}
}

// TestUndeclaredRowOrFigureFails: a row whose key the Spec does not
// declare, or one that carries an undeclared figure, fails the
// experiment, naming it.
func TestUndeclaredRowOrFigureFails(t *testing.T) {
	for _, tt := range []struct {
		name string
		row  *labresult.Row
		want string
	}{
		{"undeclared key", lab.NewRow("c"), `key "c"`},
		{"undeclared figure", func() *labresult.Row {
			r := lab.NewRow("a")
			r.Set(labresult.Metric{Name: "undeclared"}, 1)
			return r
		}(), `figure "undeclared"`},
		{"declared", func() *labresult.Row {
			r := lab.NewRow("a")
			r.Set(labresult.Metric{Name: "declared"}, 1)
			return r
		}(), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runAll(t, nil, experiment{run: func(ctx context.Context, r *lab.Run) error { r.AddRow(tt.row); return nil }})[0]
			if (tt.want == "") != (res.Error == "") || !strings.Contains(res.Error, tt.want) {
				t.Errorf("error %q, want %q", res.Error, tt.want)
			}
		})
	}
}

// TestFirstClaimSetupHeldToTheSpec: what the first claim's rows really run
// with must be what the Spec declares as ours, so a config that drifts
// from the declared setup (the report's, or a declared difference) fails
// the experiment, naming the item; the result carries the setup and
// counts the differences in the first claim's rows.
func TestFirstClaimSetupHeldToTheSpec(t *testing.T) {
	for _, tt := range []struct {
		name, item, value, want string
	}{
		{"as declared", "config", "keepalive   off", ""},
		{"declared difference", "version", "15", ""},
		{"drifted from the report's", "config", "keepalive 64", `config "keepalive 64", but the Spec declares ours as "keepalive off"`},
		{"undeclared", "quota", "1 CPU", `setup item "quota"`},
		{"not a first-claim item", "history index", "(user_id, ts)", `setup item "history index"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runAll(t, nil, experiment{run: func(ctx context.Context, r *lab.Run) error {
				r.UsedInFirstClaim(tt.item, tt.value)
				return nil
			}})[0]
			if (tt.want == "") != (res.Error == "") || !strings.Contains(res.Error, tt.want) {
				t.Errorf("error %q, want %q", res.Error, tt.want)
			}
			if len(res.Setup) != 3 || labresult.FirstClaimDifferences(res.Setup) != 1 {
				t.Errorf("setup %+v: want 3 items, 1 differing in the first claim's rows", res.Setup)
			}
		})
	}
}

// TestSetupDeclarationsChecked: a setup item that differs from the
// report's without saying why, or that lacks a value, fails Validate.
func TestSetupDeclarationsChecked(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup labresult.Setup
		want  string
	}{
		{"difference without why", labresult.Setup{Item: "nginx", Report: "defaults", Ours: "keepalive 64"}, "does not say why"},
		{"no report value", labresult.Setup{Item: "nginx", Ours: "defaults"}, "needs the report's value"},
		{"whitespace only", labresult.Setup{Item: "nginx", Report: "a  b", Ours: "a\n\tb"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := experiment{}.Spec(lab.Options{})
			s.Setup = []labresult.Setup{tt.setup}
			err := s.Validate()
			if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}
