package testkit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// fakeT records a Fatalf instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic(f)
}

// fails reports the message with which fn failed its fakeT ("" if none).
func fails(fn func(t testing.TB)) (msg string) {
	f := &fakeT{}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		msg = f.failed
	}()
	fn(f)
	return ""
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, 5*time.Second, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
	start := time.Now()
	if msg := fails(func(t testing.TB) { Eventually(t, 50*time.Millisecond, "never", func() bool { return false }) }); msg == "" {
		t.Fatal("Eventually of a condition that never holds did not fail")
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %v, want just past 50ms", d)
	}
	if msg := fails(func(t testing.TB) {
		EventuallyNil(t, 20*time.Millisecond, "never", func() error { return errors.New("why") })
	}); !strings.Contains(msg, "why") {
		t.Errorf("EventuallyNil failed with %q, want the error in it", msg)
	}
}

func TestMetricSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hits_total", Help: "h"}, []string{"code", "path"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "depth", Help: "d"})
	reg.MustRegister(c, g)
	c.WithLabelValues("200", "/a").Add(2)
	c.WithLabelValues("200", "/b").Add(3)
	c.WithLabelValues("500", "/a").Add(5)
	g.Set(7)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	scraped := Scrape(t, srv.URL)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"hits_total", nil, 10},
		{"hits_total", map[string]string{"code": "200"}, 5},
		{"hits_total", map[string]string{"path": "/a", "code": "500"}, 5},
		{"hits_total", map[string]string{"code": "404"}, 0},
		{"hits_total", map[string]string{"nosuch": "x"}, 0},
		{"depth", nil, 7},
		{"absent", nil, 0},
	} {
		if got := MetricSum(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("MetricSum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
		if got := SumFamily(scraped[tc.name], tc.labels); got != tc.want {
			t.Errorf("SumFamily(Scrape)[%s, %v] = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if mf := Family(t, reg, "depth"); mf.GetType() != dto.MetricType_GAUGE || len(mf.GetMetric()) != 1 {
		t.Errorf("Family(depth) = %v, want the gauge's one series", mf)
	}
	if mf := Family(t, reg, "absent"); mf != nil {
		t.Errorf("Family(absent) = %v, want nil", mf)
	}
}

func TestBackground(t *testing.T) {
	ln := Listen(t)
	stopped := make(chan struct{})
	t.Run("serve", func(t *testing.T) {
		Background(t, "Serve", func(ctx context.Context) error {
			defer close(stopped)
			srv := &http.Server{Handler: http.NotFoundHandler()}
			go func() { <-ctx.Done(); srv.Close() }()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	})
	select {
	case <-stopped:
	default:
		t.Fatal("the server still runs after its test ended")
	}
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			b.Write([]byte("x"))
		}
	}()
	for range 100 {
		_ = b.String()
	}
	<-done
	if got := b.String(); got != strings.Repeat("x", 100) {
		t.Fatalf("%q", got)
	}
}

func TestWaitExit(t *testing.T) {
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	if err := WaitExit(t, run("true"), 10*time.Second, "true"); err != nil {
		t.Errorf("true: %v, want nil", err)
	}
	if err := WaitExit(t, run("false"), 10*time.Second, "false"); err == nil {
		t.Error("false: nil, want its exit status")
	}
	sleep := run("sleep", "30")
	defer sleep.Process.Kill()
	if msg := fails(func(ft testing.TB) { WaitExit(ft, sleep, 50*time.Millisecond, "sleep") }); msg == "" {
		t.Error("a process still running after the timeout did not fail the test")
	}
}

func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "x.golden")
	if msg := fails(func(t testing.TB) { Golden(t, path, []byte("one\n"), false) }); !strings.Contains(msg, "-update") {
		t.Errorf("a missing golden file failed with %q, want how to create it", msg)
	}
	Golden(t, path, []byte("one\n"), true) // creates testdata/ and the file
	Golden(t, path, []byte("one\n"), false)
	if msg := fails(func(t testing.TB) { Golden(t, path, []byte("two\n"), false) }); !strings.Contains(msg, "two") {
		t.Errorf("a differing result failed with %q, want what the test got in it", msg)
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprint(w, "short and stout")
	}))
	defer srv.Close()
	resp, body := Get(t, srv.URL)
	if resp.StatusCode != http.StatusTeapot || body != "short and stout" {
		t.Errorf("Get = %d %q, want 418 and the body", resp.StatusCode, body)
	}
	nobody := "http://" + FreeAddr(t)
	if msg := fails(func(t testing.TB) { Get(t, nobody) }); !strings.Contains(msg, "refused") {
		t.Errorf("a GET of a port nobody listens on failed with %q, want the error", msg)
	}
}

// skipT records a Skipf instead of skipping the test.
type skipT struct {
	fakeT
	skipped string
}

func (s *skipT) Skipf(format string, args ...any) { s.skipped = fmt.Sprintf(format, args...) }

// TestSkipMissing: a missing program skips, unless HLAB_REQUIRE_DEPS is
// set: then it fails, so that CI cannot pass by skipping.
func TestSkipMissing(t *testing.T) {
	missing := errors.New("no such program")
	t.Setenv("HLAB_REQUIRE_DEPS", "")
	s := &skipT{}
	SkipMissing(s, "prog", missing)
	if !strings.Contains(s.skipped, "prog cannot run here: no such program") {
		t.Errorf("without HLAB_REQUIRE_DEPS: skipped %q; want a skip that says why", s.skipped)
	}
	t.Setenv("HLAB_REQUIRE_DEPS", "1")
	if msg := fails(func(t testing.TB) { SkipMissing(t, "prog", missing) }); !strings.Contains(msg, "HLAB_REQUIRE_DEPS is set") {
		t.Errorf("with HLAB_REQUIRE_DEPS: failed with %q; want a failure", msg)
	}
}
