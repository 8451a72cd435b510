package frontend

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/loadgen"
)

// Child-process mode: the black-hole tests run the front in a process of
// its own, so its goroutines and heap are the front's alone.
const (
	childPolicyEnv  = "HLAB_TEST_FRONT_POLICY"
	childBackendEnv = "HLAB_TEST_FRONT_BACKEND"
)

func TestMain(m *testing.M) {
	if p := os.Getenv(childPolicyEnv); p != "" {
		os.Exit(runChildFront(Policy(p), os.Getenv(childBackendEnv)))
	}
	os.Exit(m.Run())
}

// runChildFront serves a front with default settings on 127.0.0.1:0,
// prints "ADDR host:port", and runs until SIGTERM.
func runChildFront(p Policy, back string) int {
	reg := prometheus.NewRegistry()
	f, err := New(Config{Backend: back, Policy: p}, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("ADDR %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := server.Run(ctx, server.Config{Name: "frontend", Listener: ln, Registry: reg, Logger: logger}, f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChildFront starts the front in a child process and returns its
// address.
func startChildFront(t *testing.T, p Policy, back string) string {
	t.Helper()
	cmd, out := testkit.StartSelf(t, childPolicyEnv+"="+string(p), childBackendEnv+"="+back)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err != nil || !ok {
		t.Fatalf("child front did not say its address: %q %v", line, err)
	}
	return addr
}

// sample is one reading of the front's /metrics.
type sample struct {
	at         time.Duration
	goroutines float64
	heapMB     float64
	inflight   float64
}

func scrape(url string) (goroutines, heapMB, inflight float64, err error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(val, 64)
		switch name {
		case "go_goroutines":
			goroutines = v
		case "go_memstats_heap_alloc_bytes":
			heapMB = v / (1 << 20)
		case "frontend_inflight_requests":
			inflight = v
		}
	}
	return goroutines, heapMB, inflight, sc.Err()
}

// TestBlackHoleBounded: with a breaker or an adaptive limit, a front whose
// back turns into a black hole stays up, and its goroutines and heap stop
// growing: over a 60 s run under load, once the policy has reacted (15 s),
// the last half holds no more than the first plus a small margin.
func TestBlackHoleBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a minute of load per policy")
	}
	for _, p := range []Policy{Breaker, Adaptive} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			testBlackHole(t, p)
		})
	}
}

func testBlackHole(t *testing.T, p Policy) {
	const (
		rate    = 200 // req/s
		healthy = 5 * time.Second
		run     = 60 * time.Second
		// By then the calls made before the policy reacted have timed out,
		// and the breaker has seen its failure rate over a window.
		settle   = DefaultTimeout + DefaultBreakerWindow + 2*time.Second
		interval = 250 * time.Millisecond
	)
	back, err := backend.New(backend.Config{Delay: 5 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bln := testkit.Listen(t)
	backSrv := &http.Server{Handler: back}
	go backSrv.Serve(bln)
	t.Cleanup(func() { backSrv.Close() })

	addr := startChildFront(t, p, "http://"+bln.Addr().String()+"/")
	metricsURL := "http://" + addr + "/metrics"

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		res *loadgen.Result
		err error
	}
	loadDone := make(chan result, 1)
	go func() {
		res, err := loadgen.Run(ctx, "http://"+addr+"/", loadgen.Rate(rate), loadgen.Connections(5000),
			loadgen.Duration(healthy+run), loadgen.Timeout(30*time.Second))
		loadDone <- result{res, err}
	}()

	start := time.Now()
	var samples []sample
	holeAt := time.Duration(-1)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for range tick.C {
		at := time.Since(start)
		if holeAt < 0 && at >= healthy {
			if err := back.SetFault(backend.Config{Mode: backend.BlackHole}); err != nil {
				t.Fatal(err)
			}
			holeAt = at
		}
		g, h, in, err := scrape(metricsURL)
		if err != nil {
			t.Fatalf("at %v the front did not answer /metrics: %v", at.Round(time.Millisecond), err)
		}
		if holeAt >= 0 && at >= holeAt+settle {
			samples = append(samples, sample{at - holeAt, g, h, in})
		}
		if holeAt >= 0 && at >= holeAt+run {
			break
		}
	}
	r := <-loadDone
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, _, _, err := scrape(metricsURL); err != nil {
		t.Fatalf("the front is down after the run: %v", err)
	}

	half := len(samples) / 2
	first, last := peak(samples[:half]), peak(samples[half:])
	t.Logf("%s: %d requests, status %v, errors %v; %d samples; first half peak: %.0f goroutines, %.1f MB heap, %.0f in flight; last half: %.0f, %.1f MB, %.0f",
		p, r.res.Requests, r.res.StatusCodes, r.res.Errors, len(samples), first.goroutines, first.heapMB, first.inflight, last.goroutines, last.heapMB, last.inflight)
	if len(samples) < 100 {
		t.Fatalf("only %d samples", len(samples))
	}
	// Growth would show as a last half above the first; noise is allowed
	// for (GC timing, idle connections closing).
	if last.goroutines > first.goroutines*1.2+20 {
		t.Errorf("goroutines grew: peak %.0f in the first half, %.0f in the last", first.goroutines, last.goroutines)
	}
	if last.heapMB > first.heapMB*1.2+2 {
		t.Errorf("heap grew: peak %.1f MB in the first half, %.1f MB in the last", first.heapMB, last.heapMB)
	}
	// Bounded, not just flat: the front refuses what it cannot serve
	// instead of holding rate x deadline (600) requests.
	if last.inflight > rate*DefaultTimeout.Seconds()/2 {
		t.Errorf("%.0f requests in flight at peak in the last half: the policy is not bounding them", last.inflight)
	}
	if r.res.StatusCodes[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no 503s: the policy never refused a call (status %v)", r.res.StatusCodes)
	}
}

func peak(s []sample) sample {
	var p sample
	for _, x := range s {
		p.goroutines = max(p.goroutines, x.goroutines)
		p.heapMB = max(p.heapMB, x.heapMB)
		p.inflight = max(p.inflight, x.inflight)
	}
	return p
}
