package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/tasksload"
	"github.com/highload-lab/hlab/loadgen"
)

// headerFlags collects repeated --header "Key: Value" flags.
type headerFlags [][2]string

func (h *headerFlags) String() string { return "" }

func (h *headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("header %q is not \"Key: Value\"", v)
	}
	*h = append(*h, [2]string{strings.TrimSpace(k), strings.TrimSpace(val)})
	return nil
}

func runLoad(args []string, st *State) int {
	fs := newFlagSet(st, "load", "hlab load [flags] URL", `
Sends HTTP load to URL and reports throughput, success ratio, status codes,
errors by kind and HDR latency percentiles.

Two models:
  closed  --connections N: N keep-alive connections, each sends its next
          request when the previous one answered (what wrk and siege do).
          Throughput is whatever the server allows.
  open    --rate R: R requests per second at fixed intended send times
          (what wrk2, vegeta and k6's constant-arrival-rate do), using up
          to --connections connections (default 1000). Latency is measured
          from each request's intended send time, so a stalled server shows
          in the percentiles (no coordinated omission); the uncorrected
          figures are printed beside. Sends that went out late because every
          connection was busy are counted and reported.

Stop after --duration or --requests (one of them; default --duration 10s).
hlab load measures its own CPU use: when it used more than 90% of the CPUs
it had (its cgroup quota, taskset mask, or the machine's), it warns that the
generator may be the bottleneck (JSON: generator_cpu, generator_cpus_available,
generator_saturated).
Examples:
  hlab load --connections 10 --duration 30s http://127.0.0.1:8080/handle
  hlab load --rate 1000 --duration 1m --json http://127.0.0.1:8080/ > out.json
  hlab load --method POST --body '{"a":1}' --header 'Content-Type: application/json' --requests 10000 URL
  hlab load --scenario tasks --connections 100 --requests 1000000 http://127.0.0.1:8080`)
	conns := fs.Int("connections", 0, "closed model: number of connections; open model: max connections in flight (default 1 closed, 1000 open)")
	rate := fs.Float64("rate", 0, "open model: requests per second (0 = closed model)")
	dur := fs.Duration("duration", 0, "how long to send load, e.g. 30s, 2m (default 10s unless --requests is set)")
	requests := fs.Int64("requests", 0, "stop after this many requests")
	method := fs.String("method", "GET", "HTTP method")
	body := fs.String("body", "", "request body; @file reads it from a file")
	var headers headerFlags
	fs.Var(&headers, "header", `request header "Key: Value" (repeatable)`)
	timeout := fs.Duration("timeout", 10*time.Second, "per-request timeout")
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	scenario := fs.String("scenario", "", `multi-step virtual users instead of one request: "tasks" drives the task API at URL (hlab serve tasks) like report C's k6 script`)
	accounts := fs.Int("accounts", 0, "--scenario tasks: accounts the virtual users share (default: one per 4 connections)")
	cpuProfile := fs.String("cpuprofile", "", "debug: write a CPU profile of the run (go tool pprof) to this file")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) != 1 {
		return fail(st, "load", 2, errors.New("give exactly one URL, e.g. hlab load --connections 10 http://127.0.0.1:8080/ (see hlab load --help)"))
	}
	target := pos[0]
	if *rate < 0 {
		return fail(st, "load", 2, fmt.Errorf("--rate %v is negative: give requests per second > 0, or leave it out for the closed model", *rate))
	}
	if *conns < 0 {
		return fail(st, "load", 2, fmt.Errorf("--connections %d is negative", *conns))
	}
	if *dur < 0 || *requests < 0 {
		return fail(st, "load", 2, errors.New("--duration and --requests must not be negative"))
	}
	if *dur == 0 && *requests == 0 {
		*dur = 10 * time.Second
	}
	opts := []loadgen.Option{loadgen.Method(*method), loadgen.Timeout(*timeout)}
	if *conns > 0 {
		opts = append(opts, loadgen.Connections(*conns))
	}
	if *rate > 0 {
		opts = append(opts, loadgen.Rate(*rate))
	}
	if *dur > 0 {
		opts = append(opts, loadgen.Duration(*dur))
	}
	if *requests > 0 {
		opts = append(opts, loadgen.Requests(*requests))
	}
	if *body != "" {
		b := []byte(*body)
		if name, ok := strings.CutPrefix(*body, "@"); ok {
			if b, err = os.ReadFile(name); err != nil {
				return fail(st, "load", 2, fmt.Errorf("--body: %w", err))
			}
		}
		opts = append(opts, loadgen.Body(b))
	}
	for _, h := range headers {
		opts = append(opts, loadgen.Header(h[0], h[1]))
	}
	if err := reachable(target); err != nil {
		return fail(st, "load", 1, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch *scenario {
	case "":
	case "tasks":
		sc, err := tasksScenario(ctx, target, *accounts, *conns)
		if err != nil {
			return fail(st, "load", 1, err)
		}
		opts = append(opts, loadgen.WithScenario(sc))
	default:
		return fail(st, "load", 2, fmt.Errorf("--scenario %q: the scenarios are: tasks", *scenario))
	}
	if tty := terminal(st.Stderr); tty != nil && !*asJSON {
		opts = append(opts, loadgen.OnProgress(func(p loadgen.Progress) { fmt.Fprint(tty, "\r\033[K"+progressLine(p)) }))
		defer fmt.Fprint(tty, "\r\033[K")
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fail(st, "load", 2, fmt.Errorf("--cpuprofile: %w", err))
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(st, "load", 2, fmt.Errorf("--cpuprofile: %w", err))
		}
	}
	res, err := loadgen.Run(ctx, target, opts...)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return fail(st, "load", 2, err)
	}
	if *asJSON {
		enc := json.NewEncoder(st.Stdout)
		if err := enc.Encode(res); err != nil {
			return fail(st, "load", 1, err)
		}
	} else if err := res.WriteSummary(st.Stdout); err != nil {
		return fail(st, "load", 1, err)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(st.Stderr, "hlab load: interrupted; the figures above cover the time until then")
		return 1
	}
	return 0
}

// tasksScenario makes report C's virtual users for the task API at base:
// it creates their accounts (sign-up; existing ones are kept) and signs
// them in before the load starts, so password hashing is not measured.
func tasksScenario(ctx context.Context, base string, accounts, conns int) (*tasksload.Scenario, error) {
	vus := max(conns, 1)
	base = strings.TrimSuffix(base, "/")
	defaults.Positive(&accounts, max(1, vus/4))
	sc := &tasksload.Scenario{
		Users:    accounts,
		Email:    func(i int) string { return fmt.Sprintf("load-user-%d@hlab.test", i) },
		Password: "hlab-load-password",
	}
	if err := sc.SignUp(ctx, base); err != nil {
		return nil, err
	}
	if err := sc.SignIn(ctx, base, vus); err != nil {
		return nil, err
	}
	return sc, nil
}

// reachable checks, before any load, that the URL parses and its host
// accepts a TCP connection, so a typo or a server that is down gives one
// clear line instead of a run full of errors.
func reachable(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("malformed URL %q: %v", target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q must start with http:// or https://", target)
	}
	if u.Host == "" {
		return fmt.Errorf("URL %q has no host", target)
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	conn, err := net.DialTimeout("tcp", host, 3*time.Second)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %v (is the server running and the address right?)", host, unwrapOp(err))
	}
	conn.Close()
	return nil
}

// unwrapOp drops net.OpError's "dial tcp ..." prefix, which repeats the address.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// terminal returns w as a file when it is a terminal, else nil: live
// progress goes to terminals only, so pipes and files get just the result.
func terminal(w any) *os.File {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return f
}

func progressLine(p loadgen.Progress) string {
	line := fmt.Sprintf("%s elapsed, %d requests, %d errors", p.Elapsed.Round(time.Second), p.Requests, p.Errors)
	if p.Total > 0 {
		return fmt.Sprintf("%3.0f%%  %s", 100*min(1, p.Elapsed.Seconds()/p.Total.Seconds()), line)
	}
	if p.Target > 0 {
		return fmt.Sprintf("%3.0f%%  %s", 100*float64(p.Requests)/float64(p.Target), line)
	}
	return line
}
