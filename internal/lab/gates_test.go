package lab_test

import (
	"bytes"
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
	"github.com/highload-lab/hlab/internal/report"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// experiment is an experiment made of a function, for these tests.
type experiment struct {
	run func(ctx context.Context, r *lab.Run) error
}

func (experiment) Name() string                       { return "gate" }
func (experiment) Title() string                      { return "an integrity gate" }
func (experiment) Estimate(lab.Options) time.Duration { return time.Second }
func (experiment) Figures(lab.Options) []lab.Figure   { return nil }
func (experiment) Claims() []lab.Claim {
	return []lab.Claim{{Text: "a serves >= 2x b", Metric: "rps", Numerator: "a", Denominator: "b", AtLeast: 2}}
}
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
	results, err := lab.RunAll(context.Background(), []lab.Experiment{exp},
		lab.Options{Mode: lab.Quick, Short: true, WorkDir: t.TempDir(), Self: "/bin/true"}, sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	report.WriteScoreboard(&text, results)
	report.WriteText(&text, results[0])
	path := filepath.Join(t.TempDir(), "r.json")
	if err := report.WriteJSONFile(path, report.Document{Experiments: results}); err != nil {
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

// paired measures a (numerator) and b in pairs; a is three times faster.
func paired(ctx context.Context, r *lab.Run, a, b lab.Measurement) error {
	a.Label, b.Label = "a", "b"
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
			lab.Measurement{URL: srv.URL, Load: []loadgen.Option{loadgen.Connections(2)}},
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
