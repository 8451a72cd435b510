package labresult

import (
	"math"
	"strings"
	"testing"
)

func TestTQuantile(t *testing.T) {
	// Student's t table values.
	for _, tt := range []struct{ p, df, want float64 }{
		{0.975, 1, 12.706}, {0.975, 2, 4.303}, {0.975, 5, 2.571}, {0.975, 30, 2.042},
		{0.9995, 3, 12.924}, {0.9995, 11, 4.437}, {0.995, 10, 3.169},
	} {
		if got := tQuantile(tt.p, tt.df); math.Abs(got-tt.want) > 0.002 {
			t.Errorf("t(%v, %v) = %.4f, want %.3f", tt.p, tt.df, got, tt.want)
		}
	}
}

func TestRatioInterval(t *testing.T) {
	iv, ok := ratioInterval([]float64{2, 2, 2}, Level)
	if !ok || iv.est != 2 || iv.lo != 2 || iv.hi != 2 {
		t.Fatalf("equal ratios: %+v %v; want a point at 2", iv, ok)
	}
	iv, ok = ratioInterval([]float64{1.9, 2.1, 2.0, 2.05}, Level)
	if !ok || !(iv.lo < 2 && iv.hi > 2 && iv.lo > 1.8 && iv.hi < 2.2) {
		t.Fatalf("interval %+v", iv)
	}
	// A/B and B/A mirror each other.
	inv, _ := ratioInterval([]float64{1 / 1.9, 1 / 2.1, 1 / 2.0, 1 / 2.05}, Level)
	if math.Abs(inv.lo*iv.hi-1) > 1e-9 || math.Abs(inv.hi*iv.lo-1) > 1e-9 {
		t.Fatalf("inverse ratios: %+v vs %+v", inv, iv)
	}
	for _, bad := range [][]float64{nil, {2}, {2, 0}, {2, math.Inf(1)}} {
		if _, ok := ratioInterval(bad, Level); ok {
			t.Errorf("%v gave an interval", bad)
		}
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("median of an even count = %v", got)
	}
}

func TestDecide(t *testing.T) {
	least := Claim{Bound: AtLeast(2)}
	most := Claim{Bound: AtMost(0.75)}
	for _, tt := range []struct {
		c      Claim
		lo, hi float64
		want   Verdict
	}{
		{least, 2.1, 2.9, Reproduced},
		{least, 1.2, 1.9, NotReproduced},
		{least, 1.9, 2.1, Inconclusive},
		{most, 0.4, 0.7, Reproduced},
		{most, 0.8, 0.9, NotReproduced},
		{most, 0.7, 0.8, Inconclusive},
	} {
		if got := tt.c.decide(tt.lo, tt.hi); got != tt.want {
			t.Errorf("%s on [%v, %v]: %s, want %s", tt.c.Bound, tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestIntegrityFailures(t *testing.T) {
	one := int64(1)
	for _, tt := range []struct {
		name string
		row  Row
		want string
	}{
		{"clean", Row{SuccessRatio: F(1)}, ""},
		{"lost", Row{Lost: &one}, "lost 1"},
		{"rows differing", Row{RowsDiffering: &one}, "left 1 rows differing"},
		{"none differing", Row{RowsDiffering: new(int64)}, ""},
		{"acked vs stored", Row{Acked: &one, Stored: new(int64)}, "stored 0"},
		{"failed requests", Row{SuccessRatio: F(0.95)}, "below its bound of 99.00%"},
		{"own bound", Row{SuccessRatio: F(0.95), SuccessBound: 0.9}, ""},
		{"fails by design", Row{SuccessRatio: F(0), SuccessBound: FailsByDesign}, ""},
		{"no success at the default bound", Row{SuccessRatio: F(0)}, "answered 0.00%"},
		{"died", Row{Died: "app-3 (signal: killed)"}, "die"},
		{"no quota", Row{QuotaMissing: "app-3 asked for 0.2 CPU"}, "without its CPU quota"},
	} {
		got := strings.Join(tt.row.IntegrityFailures(), "; ")
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// paired is a row of three runs measured in rounds, each run's figures
// at v times 0.99, 1 and 1.01.
func paired(key Key, label string, figures map[string]float64) *Row {
	r := &Row{Key: key, Label: label, Runs: 3}
	for name, v := range figures {
		if IsStandard(name) {
			*standardField(r, name) = F(v)
		} else {
			r.Set(Metric{Name: name}, v)
		}
	}
	for i := 1; i <= 3; i++ {
		vals := map[string]float64{}
		for name, v := range figures {
			vals[name] = v * (1 + 0.01*float64(i-2))
		}
		r.PerRun = append(r.PerRun, RunValues{Round: i, Values: vals})
	}
	return r
}

// standardField is where the test rows keep the standard figures they
// set: rps and mean latency.
func standardField(r *Row, name string) **float64 {
	switch name {
	case "rps":
		return &r.RPS
	case "mean_ms":
		return &r.MeanMS
	}
	panic(name)
}

func TestClaimGatedByFaultRow(t *testing.T) {
	rows := func(lost int64, withFault bool) []*Row {
		out := []*Row{paired("a", "A", map[string]float64{"rps": 300}), paired("b", "B", map[string]float64{"rps": 100})}
		if withFault {
			out = append(out, &Row{Key: "fault/x", Label: "fault: x", Lost: &lost})
		}
		return out
	}
	c := Claim{Text: "c", Ratio: Ratio{Num: "a", Den: "b", Metric: "rps"}, Bound: AtLeast(2), Gates: []Key{"fault/x"}}
	if got := c.Evaluate(rows(0, true)); got.Verdict != Reproduced {
		t.Errorf("no loss under the fault: %s (%s)", got.Verdict, got.Why)
	}
	if got := c.Evaluate(rows(3, true)); got.Verdict != Invalid || !strings.Contains(got.Why, `"fault: x" lost 3`) {
		t.Errorf("3 lost under the fault: %s (%s)", got.Verdict, got.Why)
	}
	if got := c.Evaluate(rows(0, false)); got.Verdict != Invalid || !strings.Contains(got.Why, "not measured") {
		t.Errorf("fault row missing: %s (%s)", got.Verdict, got.Why)
	}
}

func TestJudgeInvalidWhenTheExperimentFailed(t *testing.T) {
	res := &Result{Rows: []*Row{paired("a", "A", map[string]float64{"rps": 300}), paired("b", "B", map[string]float64{"rps": 100})}}
	claims := []Claim{{Text: "first", Ratio: Ratio{Num: "a", Den: "b", Metric: "rps"}, Bound: AtLeast(2)},
		{Text: "second", Ratio: Ratio{Num: "a", Den: "b", Metric: "rps"}, Bound: AtLeast(4)}}
	targets := []Target{{Key: "t", Text: "a over 250 rps", Row: "a", Metric: "rps", Bound: AtLeast(250)}}
	Judge(res, claims, targets)
	if res.Verdict != Reproduced || !res.Reproduced || res.Claims[1].Verdict != NotReproduced || len(res.Claims) != 2 || res.Targets[0].Verdict != Holds {
		t.Fatalf("verdicts %s, %s, target %s", res.Claims[0].Verdict, res.Claims[1].Verdict, res.Targets[0].Verdict)
	}
	res.Error = "the gateway did not start"
	Judge(res, claims, targets)
	if res.Verdict != Invalid || res.Reproduced || !strings.Contains(res.Claims[0].Why, "did not finish") || res.Targets[0].Verdict != Undecided {
		t.Fatalf("after an error: %s (%s), target %s", res.Verdict, res.Claims[0].Why, res.Targets[0].Verdict)
	}
}

// TestClaimOnTwoFigures: a claim reads a different figure on each side,
// or a function of both rows, and keeps its paired interval.
func TestClaimOnTwoFigures(t *testing.T) {
	rows := []*Row{
		paired("gw", "gateway", map[string]float64{"gateway_cpu_us_per_msg": 1.2}),
		paired("direct", "direct producer", map[string]float64{"producer_cpu_us_per_msg": 1.0}),
	}
	// The pairs' ratios are all 1.2 (both sides drift alike): a point.
	c := Claim{Text: "the gateway costs at most 1.3x the direct producer per message",
		Ratio: Ratio{Num: "gw", Den: "direct", Metric: "gateway_cpu_us_per_msg", DenMetric: "producer_cpu_us_per_msg"}, Bound: AtMost(1.3)}
	got := c.Evaluate(rows)
	if got.Verdict != Reproduced || got.Pairs != 3 || got.CI == nil || math.Abs(*got.Ratio-1.2) > 1e-9 {
		t.Fatalf("two figures: %s %v over %d pairs, CI %v (%s)", got.Verdict, got.Ratio, got.Pairs, got.CI, got.Why)
	}
	f := Claim{Text: "the gateway's extra cost is at most a quarter",
		Ratio: Ratio{Num: "gw", Den: "direct", Metric: "extra cost", Of: func(num, den map[string]float64) (float64, bool) {
			return num["gateway_cpu_us_per_msg"]/den["producer_cpu_us_per_msg"] - 1, true
		}}, Bound: AtMost(0.25)}
	if got := f.Evaluate(rows); got.Verdict != Reproduced || math.Abs(*got.Ratio-0.2) > 1e-9 {
		t.Fatalf("function of both rows: %s %v (%s)", got.Verdict, got.Ratio, got.Why)
	}
}

// TestRenamedLabelStillJudged: claims and targets read rows by key, so a
// reworded label changes no verdict, and the result names the new label.
func TestRenamedLabelStillJudged(t *testing.T) {
	claim := Claim{Text: "a >= 2x b", Ratio: Ratio{Num: "a", Den: "b", Metric: "rps"}, Bound: AtLeast(2)}
	target := Target{Key: "a-rate", Text: "a over 250 rps", Row: "a", Metric: "rps", Bound: AtLeast(250)}
	for _, label := range []string{"one instance, 1 connection", "a single instance, one connection"} {
		res := &Result{Rows: []*Row{paired("a", label, map[string]float64{"rps": 300}), paired("b", "B", map[string]float64{"rps": 100})}}
		Judge(res, []Claim{claim}, []Target{target})
		if c := res.Claims[0]; c.Verdict != Reproduced || c.Numerator != label {
			t.Errorf("label %q: claim %s over %q (%s)", label, c.Verdict, c.Numerator, c.Why)
		}
		if tr := res.Targets[0]; tr.Verdict != Holds {
			t.Errorf("label %q: target %s (%s)", label, tr.Verdict, tr.Why)
		}
	}
}

// TestTargetVerdicts: a target holds when the figure's whole spread over
// runs is within its bound, fails when none is, and is inconclusive when
// the spread straddles it or the figure is not evidence.
func TestTargetVerdicts(t *testing.T) {
	one := int64(1)
	row := paired("r", "R", map[string]float64{"rps": 100}) // runs at 99, 100, 101
	lossy := paired("lossy", "L", map[string]float64{"rps": 100})
	lossy.Lost = &one
	single := &Row{Key: "s", Label: "S", Runs: 1, RPS: F(40), PerRun: []RunValues{{Values: map[string]float64{"rps": 40}}}}
	rows := []*Row{row, lossy, single}
	for _, tt := range []struct {
		t    Target
		want TargetVerdict
		why  string
	}{
		{Target{Key: "x", Row: "r", Metric: "rps", Bound: AtLeast(98)}, Holds, ""},
		{Target{Key: "x", Row: "r", Metric: "rps", Bound: AtLeast(110)}, Fails, ""},
		{Target{Key: "x", Row: "r", Metric: "rps", Bound: AtLeast(100.5)}, Undecided, ""},
		{Target{Key: "x", Row: "r", Metric: "rps", Bound: AtMost(101)}, Holds, ""},
		{Target{Key: "x", Row: "s", Metric: "rps", Bound: AtMost(40)}, Holds, ""}, // one run: the value itself
		{Target{Key: "x", Row: "lossy", Metric: "rps", Bound: AtLeast(50)}, Undecided, "integrity"},
		{Target{Key: "x", Row: "nope", Metric: "rps", Bound: AtLeast(50)}, Undecided, "not measured"},
		{Target{Key: "x", Row: "r", Metric: "p99_ms", Bound: AtMost(50)}, Undecided, "not measured"},
		{Target{Key: "x", Ratio: &Ratio{Num: "r", Den: "s", Metric: "rps"}, Bound: AtLeast(2)}, Holds, ""},
	} {
		got := tt.t.Evaluate(rows)
		if got.Verdict != tt.want || !strings.Contains(got.Why, tt.why) {
			t.Errorf("%+v: %s (%s), want %s (%s)", tt.t, got.Verdict, got.Why, tt.want, tt.why)
		}
	}
	shown := Target{Key: "y", Text: "r over s", Ratio: &Ratio{Num: "r", Den: "s", Metric: "rps"}}
	res := &Result{Rows: rows}
	Judge(res, nil, []Target{shown})
	if len(res.Targets) != 0 || len(res.Ratios) != 1 || res.Ratios[0].Verdict != "" || math.Abs(*res.Ratios[0].Value-100.0/40) > 1e-9 {
		t.Fatalf("a ratio without a bound is shown, not judged: targets %+v ratios %+v", res.Targets, res.Ratios)
	}
}

func TestStandardFiguresAreFigures(t *testing.T) {
	r := &Row{RPS: F(1), P90MS: F(2), P999MS: F(3)}
	for _, name := range []string{"rps", "p90_ms", "p999_ms"} {
		if r.Figure(name) == nil {
			t.Errorf("%s is a field of Row but not a figure", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Set of a standard figure did not panic")
		}
	}()
	r.Set(RPS, 2)
}
