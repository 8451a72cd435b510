package loadgen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixedResult is an open-model result with known figures, for golden output.
func fixedResult() *Result {
	corr, unc := newHistogram(), newHistogram()
	var sumC, sumU, maxC, maxU time.Duration
	for i := 1; i <= 1000; i++ {
		c := time.Duration(i) * 100 * time.Microsecond // 0.1 ms .. 100 ms
		u := time.Duration(i) * 10 * time.Microsecond  // 0.01 ms .. 10 ms
		recordLatency(corr, c)
		recordLatency(unc, u)
		sumC, sumU, maxC, maxU = sumC+c, sumU+u, max(maxC, c), max(maxU, u)
	}
	return &Result{
		Model:              "open",
		URL:                "http://127.0.0.1:8080/",
		Method:             "GET",
		Connections:        100,
		Rate:               500,
		Duration:           2*time.Second + 500*time.Microsecond,
		Requests:           1000,
		Successes:          990,
		RPS:                1000 / 2.0005,
		Throughput:         990 / 2.0005,
		SuccessRatio:       0.99,
		StatusCodes:        map[int]int64{200: 990, 503: 5},
		Errors:             map[string]int64{KindTimeout: 5},
		BytesIn:            123456,
		BytesOut:           65432,
		Latency:            latencies(corr, sumC, maxC),
		LatencyUncorrected: latencies(unc, sumU, maxU),
		Missed:             Missed{Late: 12, Unsent: 3, MaxLag: 41*time.Millisecond + 250*time.Microsecond},
		Generator:          Generator{CPU: 0.973, CPUsAvailable: 1, Saturated: true},
		corrected:          corr,
		uncorrected:        unc,
	}
}

func TestMarshalJSONGolden(t *testing.T) {
	got, err := json.MarshalIndent(fixedResult(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	testkit.Golden(t, filepath.Join("testdata", "result.golden.json"), got, *update)
}

// keys returns the object's keys, and those of nested objects as
// "parent.key".
func keys(t *testing.T, data []byte) []string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var ks []string
	for k, v := range m {
		ks = append(ks, k)
		// The maps keyed by status code or error kind vary; their own keys
		// are not part of the contract.
		if sub, ok := v.(map[string]any); ok && k != "status_codes" && k != "errors" {
			for k2 := range sub {
				ks = append(ks, k+"."+k2)
			}
		}
	}
	slices.Sort(ks)
	return ks
}

// TestJSONKeys pins the key set of real results, closed and open, to the
// golden file's, and checks the DESIGN.md contract is inside it.
func TestJSONKeys(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "result.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := keys(t, golden)
	contract := []string{"requests", "rps", "success_ratio", "status_codes", "errors",
		"latency_ms", "latency_ms.mean", "latency_ms.p50", "latency_ms.p90", "latency_ms.p99", "latency_ms.p999", "latency_ms.max",
		"latency_uncorrected_ms", "latency_uncorrected_ms.mean", "latency_uncorrected_ms.p50", "latency_uncorrected_ms.p90",
		"latency_uncorrected_ms.p99", "latency_uncorrected_ms.p999", "latency_uncorrected_ms.max"}
	for _, k := range contract {
		if !slices.Contains(want, k) {
			t.Errorf("golden JSON lacks contract key %q", k)
		}
	}

	srv := newServer(t, hello)
	for _, opts := range [][]Option{
		{Requests(5)},
		{Requests(5), Rate(1000)},
	} {
		data, err := json.Marshal(run(t, srv.URL, opts...))
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(t, data); !slices.Equal(got, want) {
			t.Errorf("keys = %v\nwant %v", got, want)
		}
		if !bytes.Contains(data, []byte(`"errors":{}`)) || !bytes.Contains(data, []byte(`"status_codes":{"200":5}`)) {
			t.Errorf("want errors {} and status_codes {\"200\":5}: %s", data)
		}
	}
}

func TestMarshalJSONEmpty(t *testing.T) {
	data, err := json.Marshal(&Result{Model: "closed"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"status_codes":{}`, `"errors":{}`, `"percentiles":[]`} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("empty result JSON lacks %s: %s", s, data)
		}
	}
}

func TestWriteSummary(t *testing.T) {
	var b strings.Builder
	if err := fixedResult().WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{"open model", "Requests", "1000", "Success ratio", "99.00%", "p99.9",
		"from actual send", "200: 990", "503: 5", "timeout: 5", "WARNING", "12 sends", "3 intended sends",
		"measured from the intended send times", "the generator may be the bottleneck: it used 0.97 of its 1 CPUs"} {
		if !strings.Contains(out, s) {
			t.Errorf("summary lacks %q:\n%s", s, out)
		}
	}

	r := fixedResult()
	r.Model, r.Missed, r.Generator = "closed", Missed{}, Generator{CPU: 0.5, CPUsAvailable: 1}
	b.Reset()
	if err := r.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "WARNING") || strings.Contains(out, "from actual send") {
		t.Errorf("closed-model summary with nothing missed:\n%s", out)
	}
}

func TestPercentiles(t *testing.T) {
	r := fixedResult()
	pts := r.Percentiles()
	if len(pts) != len(chartPercentiles) {
		t.Fatalf("%d points", len(pts))
	}
	for i, p := range pts {
		if i > 0 && p.Latency < pts[i-1].Latency {
			t.Errorf("curve decreases at %v: %v < %v", p.Percentile, p.Latency, pts[i-1].Latency)
		}
	}
	// 3 significant digits: within 0.1% of the exact value.
	if p50 := r.Percentile(50); p50 < 49950*time.Microsecond || p50 > 50050*time.Microsecond {
		t.Errorf("p50 = %v, want about 50ms", p50)
	}
	if p100 := r.Percentile(100); p100 < 100*time.Millisecond || p100 > 100100*time.Microsecond {
		t.Errorf("p100 = %v, want about 100ms", p100)
	}
	if got := (&Result{}).Percentile(99); got != 0 {
		t.Errorf("empty result p99 = %v", got)
	}
}
