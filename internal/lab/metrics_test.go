package lab

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/loadgen"
)

func TestFigureFallsBackToFigures(t *testing.T) {
	r := &labresult.Row{HeapMBAvg: labresult.F(3), P95MS: labresult.F(7), Figures: map[string]float64{"extra": 0.1}}
	for metric, want := range map[string]float64{"heap_mb_avg": 3, "p95_ms": 7, "extra": 0.1} {
		if v := r.Figure(metric); v == nil || *v != want {
			t.Errorf("Figure(%q) = %v, want %v", metric, v, want)
		}
	}
	if r.Figure("unknown") != nil {
		t.Error("an unknown figure is not nil")
	}
}

// TestMeasureCutWindowAndMetrics drives a real server on 127.0.0.1 whose
// every fifth request stalls: a cut run ends at its duration instead of
// waiting for the stalled ones, the metrics window samples the heap, and
// counters are read around the run.
func TestMeasureCutWindowAndMetrics(t *testing.T) {
	var served, scrapes atomic.Int64
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			scrapes.Add(1)
			fmt.Fprintf(w, "go_memstats_heap_alloc_bytes %d\ngo_goroutines 7\nserved_total{k=\"a\"} %d\n", 2<<20, served.Load())
			return
		}
		if served.Add(1)%5 == 0 {
			select { // a stall far longer than the run
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	defer close(stop)

	run := &Run{Opts: Options{Short: true}, res: &labresult.Result{Env: map[string]string{}}}
	start := time.Now()
	row, err := run.Measure(context.Background(), Measurement{
		Key: "cut", Duration: 600 * time.Millisecond, Repeat: 1, NoWarmup: true,
		Driver:     HTTP{URL: srv.URL + "/", Cut: true, Load: []loadgen.Option{loadgen.Connections(4), loadgen.Timeout(time.Minute)}},
		SampleFrom: 200 * time.Millisecond, SampleTo: 500 * time.Millisecond,
		Metrics:  []string{srv.URL + "/metrics"},
		Counters: []Counter{{Metric: labresult.Metric{Name: "served"}, URL: srv.URL + "/metrics", Name: "served_total"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the cut run took %v: it waited for the stalled requests", took)
	}
	if row.HeapMBAvg == nil || *row.HeapMBAvg != 2 || row.GoroutinesMax == nil || *row.GoroutinesMax != 7 {
		t.Errorf("heap %v, goroutines %v; want 2 MB and 7", row.HeapMBAvg, row.GoroutinesMax)
	}
	if n := scrapes.Load(); n < 3 {
		t.Errorf("%d scrapes; want the window sampled every 100 ms", n)
	}
	if row.Figures["served"] < 1 {
		t.Errorf("figures %v; want the served counter's increase", row.Figures)
	}
	if row.RPS == nil || *row.RPS <= 0 || row.P95MS == nil {
		t.Errorf("rps %v, p95 %v", row.RPS, row.P95MS)
	}
}

func TestMeasureWindowNeverOpened(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	run := &Run{Opts: Options{Short: true}, res: &labresult.Result{Env: map[string]string{}}}
	_, err := run.Measure(context.Background(), Measurement{
		Key: "late-window", Driver: HTTP{URL: srv.URL + "/"}, Duration: 100 * time.Millisecond, Repeat: 1, NoWarmup: true,
		SampleFrom: time.Minute,
	})
	if err == nil || !strings.Contains(err.Error(), "sampling window") {
		t.Fatalf("err = %v; want the window that never opened reported", err)
	}
}
