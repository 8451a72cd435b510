package gateway_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/promtext"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestMetricsSwitch runs a gateway process with its metrics on and off:
// off, it still serves publishes, and /metrics still serves the process
// metrics the lab reads (RSS), but none of the gateway's own series.
func TestMetricsSwitch(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		own  bool // the gateway's own series are served
	}{
		{"on by default", nil, true},
		{"off", []string{"--metrics=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ports := make([]int, 2)
			for i := range ports {
				p, err := deps.FreePort()
				if err != nil {
					t.Fatal(err)
				}
				ports[i] = p
			}
			grpcAddr, httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
			fs := flag.NewFlagSet("databus", flag.ContinueOnError)
			var o gateway.Options
			o.RegisterFlags(fs)
			if err := fs.Parse(append([]string{"--echo", "--grpc-addr", grpcAddr, "--drain-timeout", "1s"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if o.NoMetrics == tc.own {
				t.Fatalf("NoMetrics %v after %q", o.NoMetrics, tc.args)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			hs := server.Config{Addr: httpAddr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			go func() { done <- gateway.Serve(ctx, hs, o) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			url := "http://" + httpAddr + "/metrics"
			testkit.EventuallyNil(t, 10*time.Second, "the gateway serves /metrics", func() error {
				_, err := promtext.Scrape(ctx, http.DefaultClient, url)
				return err
			})

			pub, err := dial(t, grpcAddr).NewPublisher(ctx, "anything")
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			for i := range 20 {
				if err := pub.Publish(ctx, msgs(i, 1)...); err != nil {
					t.Fatalf("publish %d: %v", i, err)
				}
			}

			m, err := promtext.Scrape(ctx, http.DefaultClient, url)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Has("process_resident_memory_bytes") || !m.Has("process_cpu_seconds_total") {
				t.Error("/metrics lacks the process metrics the lab reads")
			}
			if got := m.Has("databus_publish_latency_seconds_count"); got != tc.own {
				t.Errorf("databus_publish_latency_seconds served: %v, want %v", got, tc.own)
			}
			if tc.own {
				if n := m.Sum("databus_publish_latency_seconds_count", nil); n != 20 {
					t.Errorf("%v batches timed, want 20", n)
				}
				if n := m.Sum("databus_streams", map[string]string{"kind": "publish"}); n != 1 {
					t.Errorf("%v publish streams counted, want 1", n)
				}
			}
		})
	}
}

// TestConnIdleTimeoutFlag: --kafka-conn-idle-timeout parses, goes back
// into a command line, and is refused outside franz-go's bounds with an
// error that names the flag.
func TestConnIdleTimeoutFlag(t *testing.T) {
	fs := flag.NewFlagSet("databus", flag.ContinueOnError)
	var o gateway.Options
	o.RegisterFlags(fs)
	if err := fs.Parse([]string{"--brokers", "127.0.0.1:1", "--kafka-conn-idle-timeout", "1s"}); err != nil {
		t.Fatal(err)
	}
	if o.ConnIdleTimeout != time.Second {
		t.Fatalf("ConnIdleTimeout %v, want 1s", o.ConnIdleTimeout)
	}
	if args := o.Args(); !slices.Contains(args, "--kafka-conn-idle-timeout=1s") {
		t.Errorf("Args %q lack the timeout", args)
	}
	if args := (gateway.Options{Config: gateway.Config{ConnIdleTimeout: gateway.DefaultConnIdleTimeout}}).Args(); len(args) != 0 {
		t.Errorf("the default gives arguments %q, want none", args)
	}

	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{0, true}, // the default
		{100 * time.Millisecond, true},
		{15 * time.Minute, true},
		{50 * time.Millisecond, false},
		{16 * time.Minute, false},
		{-time.Second, false},
	} {
		g, err := gateway.New(gateway.Config{Brokers: []string{"127.0.0.1:1"}, ConnIdleTimeout: tc.d})
		if g != nil {
			g.Close()
		}
		switch {
		case tc.ok && err != nil:
			t.Errorf("%v: %v", tc.d, err)
		case !tc.ok && (!errors.Is(err, gateway.ErrBadLimit) || !strings.Contains(fmt.Sprint(err), "--kafka-conn-idle-timeout")):
			t.Errorf("%v: error %v, want ErrBadLimit naming the flag", tc.d, err)
		}
	}
}

// TestGOMAXPROCSFlag: --gomaxprocs takes a positive count and goes back
// into the command line the lab builds; 0 or less is refused.
func TestGOMAXPROCSFlag(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int
		ok   bool
	}{{"1", 1, true}, {"2", 2, true}, {"0", 0, false}, {"-1", 0, false}, {"x", 0, false}} {
		fs := flag.NewFlagSet("databus", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o gateway.Options
		o.RegisterFlags(fs)
		err := fs.Parse([]string{"--gomaxprocs", tc.arg})
		if (err == nil) != tc.ok || o.GOMAXPROCS != tc.want {
			t.Errorf("--gomaxprocs %s: %d, %v", tc.arg, o.GOMAXPROCS, err)
			continue
		}
		if tc.ok && !slices.Contains(o.Args(), "--gomaxprocs="+tc.arg) {
			t.Errorf("Args %q lack --gomaxprocs=%s", o.Args(), tc.arg)
		}
	}
}

// TestConnectionAgeFlags: --max-connection-age and its grace parse (a
// negative value: never), go back into a command line, and their
// defaults give no arguments.
func TestConnectionAgeFlags(t *testing.T) {
	fs := flag.NewFlagSet("databus", flag.ContinueOnError)
	var o gateway.Options
	o.RegisterFlags(fs)
	if o.MaxConnectionAge != gateway.DefaultMaxConnectionAge || o.MaxConnectionAgeGrace != gateway.DefaultMaxConnectionAgeGrace {
		t.Fatalf("defaults %v and %v, want %v and %v", o.MaxConnectionAge, o.MaxConnectionAgeGrace, gateway.DefaultMaxConnectionAge, gateway.DefaultMaxConnectionAgeGrace)
	}
	if args := o.Args(); len(args) != 0 {
		t.Errorf("the defaults give arguments %q, want none", args)
	}
	if err := fs.Parse([]string{"--max-connection-age", "5m", "--max-connection-age-grace", "-1s"}); err != nil {
		t.Fatal(err)
	}
	if o.MaxConnectionAge != 5*time.Minute || o.MaxConnectionAgeGrace != -time.Second {
		t.Fatalf("parsed %v and %v, want 5m and -1s", o.MaxConnectionAge, o.MaxConnectionAgeGrace)
	}
	for _, want := range []string{"--max-connection-age=5m0s", "--max-connection-age-grace=-1s"} {
		if args := o.Args(); !slices.Contains(args, want) {
			t.Errorf("Args %q lack %s", args, want)
		}
	}
}
