package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/loadgen"
)

func row(label string, rps float64) *Row { return &Row{Label: label, RPS: F(rps)} }

func TestClaimEvaluate(t *testing.T) {
	rows := []*Row{row("one", 100), row("three", 250), {Label: "empty"}}
	tests := []struct {
		name       string
		claim      Claim
		wantRatio  float64 // 0: no ratio
		reproduced bool
	}{
		{"holds", Claim{Metric: "rps", Numerator: "three", Denominator: "one", AtLeast: 2}, 2.5, true},
		{"fails", Claim{Metric: "rps", Numerator: "three", Denominator: "one", AtLeast: 3}, 2.5, false},
		{"at most", Claim{Metric: "rps", Numerator: "one", Denominator: "three", AtMost: 0.5}, 0.4, true},
		{"missing row", Claim{Metric: "rps", Numerator: "nosuch", Denominator: "one", AtLeast: 1}, 0, false},
		{"missing figure", Claim{Metric: "rps", Numerator: "empty", Denominator: "one", AtLeast: 1}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.claim.Evaluate(rows)
			if tt.wantRatio == 0 {
				if got.Ratio != nil || got.Why == "" {
					t.Fatalf("ratio %v why %q: want no ratio and a reason", got.Ratio, got.Why)
				}
			} else if got.Ratio == nil || *got.Ratio != tt.wantRatio {
				t.Fatalf("ratio %v, want %v", got.Ratio, tt.wantRatio)
			}
			if got.Reproduced != tt.reproduced {
				t.Fatalf("reproduced %v, want %v", got.Reproduced, tt.reproduced)
			}
		})
	}
}

func TestJudgeNeedsEveryClaim(t *testing.T) {
	res := &Result{Rows: []*Row{row("a", 100), row("b", 300)}}
	Judge(res, []Claim{
		{Text: "first", Metric: "rps", Numerator: "b", Denominator: "a", AtLeast: 2},
		{Text: "second", Metric: "rps", Numerator: "b", Denominator: "a", AtLeast: 4},
	})
	if res.Reproduced || res.Claim != "first" || *res.Ratio != 3 || len(res.Claims) != 2 {
		t.Fatalf("got reproduced %v claim %q ratio %v claims %d", res.Reproduced, res.Claim, *res.Ratio, len(res.Claims))
	}
	Judge(res, []Claim{{Text: "first", Metric: "rps", Numerator: "b", Denominator: "a", AtLeast: 2}})
	if !res.Reproduced || res.Claims != nil || len(res.Verdicts) != 1 {
		t.Fatalf("one claim: reproduced %v claims %v verdicts %d", res.Reproduced, res.Claims, len(res.Verdicts))
	}
}

func TestAggregateTakesMedians(t *testing.T) {
	mk := func(rps float64, p99 time.Duration) runFigures {
		return runFigures{res: &loadgen.Result{RPS: rps, Requests: 10, Latency: loadgen.Latencies{P99: p99}, StatusCodes: map[int]int64{200: 10}}, cpu: 0.2}
	}
	r := aggregate("x", []runFigures{mk(100, 3*time.Millisecond), mk(300, time.Millisecond), mk(200, 2*time.Millisecond)})
	if *r.RPS != 200 || *r.RPSMin != 100 || *r.RPSMax != 300 || *r.P99MS != 2 || r.Runs != 3 {
		t.Fatalf("rps %v (%v-%v) p99 %v runs %d", *r.RPS, *r.RPSMin, *r.RPSMax, *r.P99MS, r.Runs)
	}
	if r.Requests != 30 || r.StatusCodes["200"] != 30 {
		t.Fatalf("requests %d codes %v: want the sums over runs", r.Requests, r.StatusCodes)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("median of an even count = %v", got)
	}
}

// expNamed is an experiment that only has a name, for Find.
type expNamed string

func (e expNamed) Name() string                  { return string(e) }
func (expNamed) Title() string                   { return "t" }
func (expNamed) Claims() []Claim                 { return nil }
func (expNamed) Estimate(Options) time.Duration  { return 0 }
func (expNamed) Run(context.Context, *Run) error { return nil }

func TestFind(t *testing.T) {
	all := []Experiment{expNamed("scale"), expNamed("async")}
	got, err := Find(all, nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("no names: %v %v", got, err)
	}
	got, err = Find(all, []string{"async"})
	if err != nil || len(got) != 1 || got[0].Name() != "async" {
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
	if q.Repeats() != 3 || f.Repeats() != 5 || (Options{Repeat: 7}).Repeats() != 7 {
		t.Fatal("Repeats defaults")
	}
	bad := Options{LB: "haproxy"}
	if err := bad.setDefaults(); err == nil {
		t.Fatal("unknown LB accepted")
	}
}
