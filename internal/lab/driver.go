package lab

import (
	"context"
	"strconv"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/loadgen"
)

// Driver puts load on a system for one run and says what it saw: the
// runner's one way to measure, whatever speaks to the system. HTTP
// (hlab's load generator) is the default; the databus experiment drives
// the gateway with its checker.
type Driver interface {
	// Drive loads the system for about d and returns what it measured.
	// It calls window(true) when the measured load starts and
	// window(false) when it ends (before any verification that follows),
	// so that the runner samples the services' CPU and memory over exactly
	// that window; window is never nil.
	Drive(ctx context.Context, d time.Duration, window func(open bool)) (*Sample, error)
}

// Sample is what one run of a driver measured.
type Sample struct {
	Model       string  // "closed", "open", or a driver's own
	Connections int     // connections or streams
	Rate        float64 // open model: requests per second asked for
	// Window is the measured time the rates are per.
	Window time.Duration
	// Requests finished in the window, failed ones included; Successes
	// those answered successfully (HTTP 2xx-3xx, a message acked).
	Requests, Successes int64
	// Latency of the finished requests; Percentiles the curve, for charts.
	Latency     loadgen.Latencies
	Percentiles []labresult.Percentile
	StatusCodes map[string]int64 // by HTTP status, where there is one
	Errors      map[string]int64 // failures without an answer, by kind
	Late        int64            // open model: sends more than 10 ms late
	// Lost counts what the system acknowledged and then did not deliver,
	// for drivers that verify delivery; nil when not verified.
	Lost *int64
	// Figures are the driver's own per-run figures (go to Row.Figures).
	Figures map[string]float64
	// Generator is the CPU the generating process (the lab's own, for
	// the HTTP driver) used during the run and the CPUs it had; zero when
	// the driver does not measure it.
	Generator loadgen.Generator
}

// Goodput is successful requests per second of the window: the only
// rate the lab compares, so that fast failures cannot raise it.
func (s *Sample) Goodput() float64 {
	if s.Window <= 0 {
		return 0
	}
	return float64(s.Successes) / s.Window.Seconds()
}

// SuccessRatio is Successes / Requests; 0 when nothing finished.
func (s *Sample) SuccessRatio() float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Successes) / float64(s.Requests)
}

// HTTP drives a service over HTTP with hlab's load generator (package
// loadgen): the closed model by default, the open one with
// loadgen.Rate among Load.
type HTTP struct {
	URL  string
	Load []loadgen.Option // the model and its settings; Drive adds the duration
	// Cut ends each run at its duration, abandoning the requests still in
	// flight instead of waiting for them: the rate is then the answers
	// completed within the duration per second of it. A closed-model run
	// against a dependency that stalls 10 s would otherwise end with
	// seconds of connections waiting for stragglers, counted as run time.
	Cut bool
}

// Drive runs the load generator for d.
func (h HTTP) Drive(ctx context.Context, d time.Duration, window func(bool)) (*Sample, error) {
	if h.Cut {
		cutCtx, cut := context.WithCancel(ctx)
		t := time.AfterFunc(d, cut)
		defer t.Stop()
		defer cut()
		ctx = cutCtx
	}
	window(true)
	res, err := loadgen.Run(ctx, h.URL, append(h.Load, loadgen.Duration(d))...)
	window(false)
	if err != nil {
		return nil, err
	}
	return SampleOf(res), nil
}

// SampleOf converts a load generator's result.
func SampleOf(res *loadgen.Result) *Sample {
	s := &Sample{
		Model: res.Model, Connections: res.Connections, Rate: res.Rate, Window: res.Duration,
		Requests: res.Requests, Successes: res.Successes, Latency: res.Latency,
		StatusCodes: map[string]int64{}, Errors: map[string]int64{}, Late: res.Missed.Late,
		Generator: res.Generator,
	}
	for code, n := range res.StatusCodes {
		s.StatusCodes[strconv.Itoa(code)] += n
	}
	for k, n := range res.Errors {
		s.Errors[k] += n
	}
	for _, p := range res.Percentiles() {
		s.Percentiles = append(s.Percentiles, labresult.Percentile{Q: p.Percentile, MS: ms(p.Latency)})
	}
	return s
}

var _ Driver = HTTP{}
