package lab

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/loadgen"
)

// fakeDriver answers rate requests per second of its (virtual) window,
// each run's rate multiplied by a normal noise of sd; it measures nothing
// real and takes no time.
type fakeDriver struct {
	rate, sd float64
	rng      *rand.Rand
	lost     int64
}

func (f *fakeDriver) Drive(_ context.Context, d time.Duration, window func(bool)) (*Sample, error) {
	window(true)
	window(false)
	n := int64(f.rate * (1 + f.sd*f.rng.NormFloat64()) * d.Seconds())
	s := &Sample{Model: "closed", Connections: 1, Window: d, Requests: n, Successes: n,
		Latency: loadgen.Latencies{Mean: time.Millisecond, P99: 2 * time.Millisecond}}
	if f.lost > 0 {
		s.Lost = &f.lost
	}
	return s, nil
}

// judgeSynthetic measures a claim "a / b >= 2" on fake rows whose true
// ratio is truth, with 5% noise on each run, through MeasurePaired's
// sequential rule and Judge, and returns the verdict.
func judgeSynthetic(t *testing.T, truth float64, seed uint64) labresult.ClaimResult {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	claim := labresult.Claim{Text: "a >= 2x b", Ratio: labresult.Ratio{Num: "a", Den: "b", Metric: "rps"}, Bound: labresult.AtLeast(2)}
	res := &labresult.Result{Env: map[string]string{}}
	run := &Run{Opts: Options{Mode: Quick, Short: true}, res: res, spec: Spec{Claims: []labresult.Claim{claim}}}
	rows, err := run.MeasurePaired(context.Background(), Paired{Measurements: []Measurement{
		{Key: "a", Driver: &fakeDriver{rate: 1000 * truth, sd: 0.05, rng: rng}, NoWarmup: true},
		{Key: "b", Driver: &fakeDriver{rate: 1000, sd: 0.05, rng: rng}, NoWarmup: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	res.Rows = rows
	labresult.Judge(res, []labresult.Claim{claim}, nil)
	return res.Claims[0]
}

// TestVerdictRule: synthetic pairs against a threshold of 2 with 5% noise
// on each run: a true ratio of 2.5 reproduces, 1.5 does not, 2.0 is
// inconclusive; and over many seeds the rule keeps its error rates.
func TestVerdictRule(t *testing.T) {
	for _, tt := range []struct {
		truth float64
		want  labresult.Verdict
	}{{2.5, labresult.Reproduced}, {1.5, labresult.NotReproduced}, {2.0, labresult.Inconclusive}} {
		c := judgeSynthetic(t, tt.truth, 1)
		if c.Verdict != tt.want || c.CI == nil || c.Pairs < DefaultMinRounds || len(c.PairRatios) != c.Pairs {
			t.Errorf("true ratio %v: %s, CI %v over %d pairs; want %s", tt.truth, c.Verdict, c.CI, c.Pairs, tt.want)
		}
		if tt.want == labresult.Inconclusive && c.Pairs != DefaultMaxRounds {
			t.Errorf("true ratio at the threshold stopped after %d pairs; want every round tried", c.Pairs)
		}
	}

	const trials = 300
	count := map[float64]map[labresult.Verdict]int{}
	for _, truth := range []float64{2.5, 1.5, 2.0} {
		count[truth] = map[labresult.Verdict]int{}
		for seed := range uint64(trials) {
			count[truth][judgeSynthetic(t, truth, 100+seed).Verdict]++
		}
	}
	if n := count[2.5][labresult.Reproduced]; n < trials*99/100 {
		t.Errorf("true 2.5: reproduced %d of %d", n, trials)
	}
	if n := count[1.5][labresult.NotReproduced]; n < trials*99/100 {
		t.Errorf("true 1.5: not reproduced %d of %d", n, trials)
	}
	// At the threshold, a 95% interval with early stops only at 99.9%
	// should cover it about 95% of the time.
	if n := count[2.0][labresult.Inconclusive]; n < trials*90/100 {
		t.Errorf("true 2.0: inconclusive %d of %d (%v); the rule claims more than it measured", n, trials, count[2.0])
	}
	t.Logf("verdicts by true ratio: %v", count)
}

func TestMeasurePairedAlternatesOrder(t *testing.T) {
	var order []string
	rec := func(label string) Driver {
		return driverFunc(func(ctx context.Context, d time.Duration, w func(bool)) (*Sample, error) {
			order = append(order, label)
			w(true)
			w(false)
			return &Sample{Window: time.Second, Requests: 10, Successes: 10}, nil
		})
	}
	run := &Run{Opts: Options{Short: true, Pairs: 4}, res: &labresult.Result{Env: map[string]string{}}}
	rows, err := run.MeasurePaired(context.Background(), Paired{Measurements: []Measurement{
		{Key: "a", Driver: rec("a"), NoWarmup: true}, {Key: "b", Driver: rec("b"), NoWarmup: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ""); got != "abbaabba" {
		t.Errorf("order %s, want abbaabba", got)
	}
	if len(rows[0].PerRun) != 4 || rows[0].PerRun[3].Round != 4 || rows[0].Runs != 4 {
		t.Errorf("per run %+v", rows[0].PerRun)
	}
}

type driverFunc func(context.Context, time.Duration, func(bool)) (*Sample, error)

func (f driverFunc) Drive(ctx context.Context, d time.Duration, w func(bool)) (*Sample, error) {
	return f(ctx, d, w)
}

func TestPlanCores(t *testing.T) {
	// scale's processes: four instances at 0.2 CPU and nginx without a quota.
	demands := []float64{0.2, 0.2, 0.2, 0.2, 0}
	for _, tt := range []struct {
		cores  int
		ok     bool
		gen    []int
		own    [][]int
		shared []int
	}{
		{cores: 2},
		{cores: 4},
		{cores: 8, ok: true, gen: []int{0, 1}, own: [][]int{{2}, {3}, {4}, {5}, nil}, shared: []int{6, 7}},
		{cores: 16, ok: true, gen: []int{0, 1, 2, 3}, own: [][]int{{4}, {5}, {6}, {7}, nil}, shared: []int{8, 9, 10, 11, 12, 13, 14, 15}},
	} {
		p := planCores(tt.cores, demands)
		if p.OK != tt.ok {
			t.Errorf("%d cores: ok %v (%s), want %v", tt.cores, p.OK, p.Why, tt.ok)
			continue
		}
		if !p.OK {
			if !strings.Contains(p.Why, "share") {
				t.Errorf("%d cores: why %q does not say they share", tt.cores, p.Why)
			}
			continue
		}
		if !equalInts(p.Generator, tt.gen) || !equalInts(p.Shared, tt.shared) {
			t.Errorf("%d cores: generator %v shared %v, want %v %v", tt.cores, p.Generator, p.Shared, tt.gen, tt.shared)
		}
		for i := range tt.own {
			if !equalInts(p.Own[i], tt.own[i]) {
				t.Errorf("%d cores: process %d on %v, want %v", tt.cores, i, p.Own[i], tt.own[i])
			}
		}
		// No core is given twice.
		seen := map[int]bool{}
		for _, set := range append([][]int{p.Generator, p.Shared}, p.Own...) {
			for _, c := range set {
				if seen[c] {
					t.Errorf("%d cores: core %d given twice", tt.cores, c)
				}
				seen[c] = true
			}
		}
	}
	// A process with more than a core's quota gets its ceiling.
	if p := planCores(4, []float64{1.5}); !p.OK || len(p.Own[0]) != 2 || len(p.Generator) != 2 {
		t.Errorf("4 cores, one process at 1.5 CPU: %+v", p)
	}
	// Two cores fit one service and the generator, nothing more.
	if p := planCores(2, []float64{1}); !p.OK || !equalInts(p.Generator, []int{0}) || !equalInts(p.Own[0], []int{1}) {
		t.Errorf("2 cores, one service: %+v", p)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAggregateTakesMediansOfGoodput(t *testing.T) {
	mk := func(ok, failed int64, p99 time.Duration) runFigures {
		return runFigures{sample: &Sample{Window: time.Second, Requests: ok + failed, Successes: ok,
			Latency: loadgen.Latencies{P99: p99}, StatusCodes: map[string]int64{"200": ok, "500": failed}}, cpu: 0.2}
	}
	r := aggregate("x", []runFigures{mk(100, 0, 3*time.Millisecond), mk(300, 100, time.Millisecond), mk(200, 0, 2*time.Millisecond)})
	if *r.RPS != 200 || *r.RPSMin != 100 || *r.RPSMax != 300 || *r.P99MS != 2 || r.Runs != 3 {
		t.Fatalf("rps %v (%v-%v) p99 %v runs %d", *r.RPS, *r.RPSMin, *r.RPSMax, *r.P99MS, r.Runs)
	}
	if r.Requests != 700 || r.StatusCodes["200"] != 600 || r.StatusCodes["500"] != 100 {
		t.Fatalf("requests %d codes %v: want the sums over runs", r.Requests, r.StatusCodes)
	}
	if len(r.PerRun) != 3 || r.PerRun[1].Values["rps"] != 300 || r.PerRun[1].Round != 0 {
		t.Fatalf("per run %+v: want each run's figures, round 0 (not paired)", r.PerRun)
	}
}

// expNamed is an experiment that only has a name, for Find.
type expNamed string

func (e expNamed) Spec(Options) Spec             { return Spec{Name: string(e), Title: "t"} }
func (expNamed) Estimate(Options) time.Duration  { return 0 }
func (expNamed) Run(context.Context, *Run) error { return nil }

func TestFind(t *testing.T) {
	all := []Experiment{expNamed("scale"), expNamed("async")}
	got, err := Find(all, nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("no names: %v %v", got, err)
	}
	got, err = Find(all, []string{"async"})
	if err != nil || len(got) != 1 || Name(got[0]) != "async" {
		t.Fatalf("async: %v %v", got, err)
	}
	_, err = Find(all, []string{"nosuch"})
	if err == nil || !strings.Contains(err.Error(), "scale, async") {
		t.Fatalf("unknown name: %v, want the list of known ones", err)
	}
}

func TestOptionsDurations(t *testing.T) {
	q, f := Options{Mode: Quick}, Options{Mode: Full}
	if q.RunDuration(5*time.Second, 3*time.Second) != 3*time.Second || f.RunDuration(5*time.Second, 3*time.Second) != 5*time.Second {
		t.Fatal("RunDuration: quick caps, full uses the report's")
	}
	if q.Repeats() != 1 || f.Repeats() != 3 || (Options{Repeat: 7}).Repeats() != 7 {
		t.Fatal("Repeats defaults")
	}
	if d, n := q.MinRun(); d != 5*time.Second || n != 2000 {
		t.Fatalf("MinRun %v %d: no quick run shorter than 5 s or 2,000 requests", d, n)
	}
	bad := Options{LB: "haproxy"}
	if err := bad.setDefaults(); err == nil {
		t.Fatal("unknown LB accepted")
	}
}

// TestAggregateMarksGeneratorSaturated: one run whose generator used
// nearly all its CPU marks the row; the row keeps that run's figures.
func TestAggregateMarksGeneratorSaturated(t *testing.T) {
	mk := func(cpu float64, saturated bool) runFigures {
		return runFigures{sample: &Sample{Window: time.Second, Requests: 10, Successes: 10,
			Generator: loadgen.Generator{CPU: cpu, CPUsAvailable: 1, Saturated: saturated}}}
	}
	r := aggregate("x", []runFigures{mk(0.5, false), mk(0.95, true), mk(0.6, false)})
	if !r.GeneratorSaturated || r.GeneratorCPU == nil || *r.GeneratorCPU != 0.95 || *r.GeneratorCPUsAvailable != 1 {
		t.Errorf("saturated %v cpu %v of %v, want true, 0.95 of 1", r.GeneratorSaturated, r.GeneratorCPU, r.GeneratorCPUsAvailable)
	}
	r = aggregate("y", []runFigures{mk(0.5, false)})
	if r.GeneratorSaturated || *r.GeneratorCPU != 0.5 {
		t.Errorf("saturated %v cpu %v", r.GeneratorSaturated, *r.GeneratorCPU)
	}
	// A driver that does not measure it leaves the figures out.
	r = aggregate("z", []runFigures{{sample: &Sample{Window: time.Second}}})
	if r.GeneratorSaturated || r.GeneratorCPU != nil {
		t.Errorf("unmeasured: saturated %v cpu %v", r.GeneratorSaturated, r.GeneratorCPU)
	}
	if s := SampleOf(&loadgen.Result{Generator: loadgen.Generator{CPU: 0.2, CPUsAvailable: 2}}); s.Generator.CPU != 0.2 {
		t.Errorf("SampleOf lost the generator's figures: %+v", s.Generator)
	}
}
