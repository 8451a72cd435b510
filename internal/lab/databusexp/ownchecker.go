package databusexp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// The baselines of the gateway's costs (the direct producer of
// producer.go, the direct consumer of subscribe.go) run the checker as
// a process of their own at 1 CPU, as the gateway runs, so that their
// CPU is the kernel's count for that process, not the lab's, which also
// runs the gateway's checkers.

// clientMemMB is a baseline process's memory quota.
const clientMemMB = 1024

// directClient is what a baseline that reads or writes Kafka itself
// (databus-checker --direct) runs against: the run's Kafka, with its
// security passed on as flags (file paths), and a topic.
type directClient struct {
	run     *lab.Run
	brokers []string
	sec     kafkasec.Config
	topic   string
}

// direct is a directClient of the run's Kafka on topic.
func (b *bench) direct(topic string) directClient {
	return directClient{run: b.run, brokers: b.k.Brokers, sec: b.k.Security, topic: topic}
}

// check runs "hlab databus-checker --direct" on c's Kafka and topic with
// args, as a process of its own named name (runOwnChecker).
func (c directClient) check(ctx context.Context, name string, window func(bool), args ...string) (*checker.Result, sandbox.Usage, error) {
	all := append([]string{"--direct", "--brokers", strings.Join(c.brokers, ","), "--topic", c.topic, "--json"}, args...)
	return runOwnChecker(ctx, c.run, name, append(all, cliflag.Args(c.sec)...), window)
}

// runOwnChecker runs "hlab databus-checker args..." (args must ask for
// --json) as a process of its own named name, at 1 CPU, and returns its
// result and the CPU its process used (its cgroup, or /proc without
// one) over the window the checker says it measured (checker's
// WindowOpenLine and WindowClosedLine on its stderr), which it passes on
// to window.
func runOwnChecker(ctx context.Context, run *lab.Run, name string, args []string, window func(bool)) (*checker.Result, sandbox.Usage, error) {
	var (
		stdout lines
		meter  *sandbox.Meter
		usage  sandbox.Usage
		mu     sync.Mutex
		proc   *sandbox.Process
	)
	stderr := &lines{keep: 5, on: func(line string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case line == checker.WindowOpenLine && meter == nil && proc != nil:
			meter = proc.Measure()
			window(true)
		case line == checker.WindowClosedLine && meter != nil:
			usage = meter.Stop()
			window(false)
		}
	}}
	mu.Lock()
	proc, err := run.Sandbox.Start(ctx, sandbox.Spec{Name: name, Path: run.Opts.Self, Args: append([]string{"databus-checker"}, args...),
		CPU: gatewayCPU, MemoryMB: clientMemMB, Stdout: &stdout, Stderr: stderr})
	mu.Unlock()
	if err != nil {
		return nil, usage, fmt.Errorf("databus: start the %s: %w", name, err)
	}
	select {
	case <-proc.Done():
	case <-ctx.Done():
	}
	proc.Stop(5 * time.Second) // drains its output
	if err := ctx.Err(); err != nil {
		return nil, usage, err
	}
	var res checker.Result
	if err := json.Unmarshal([]byte(stdout.text()), &res); err != nil {
		return nil, usage, fmt.Errorf("databus: the %s (hlab databus-checker %s) gave no result (%v); it said: %s", name, strings.Join(args, " "), proc.ExitErr(), stderr.tail())
	}
	mu.Lock()
	defer mu.Unlock()
	if meter == nil {
		return nil, usage, fmt.Errorf("databus: the %s never opened its measured window (%v); it said: %s", name, proc.ExitErr(), stderr.tail())
	}
	return &res, usage, nil
}
