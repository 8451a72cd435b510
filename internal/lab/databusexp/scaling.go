package databusexp

// The report's two statements on its echo server beyond the table: it
// "scales almost linearly with GOMAXPROCS", and its metrics cost ~17%.
// Three echo gateways serve 50 clients in rounds, their order
// alternating: at 1 CPU and GOMAXPROCS=1 with metrics (the base), the
// same without metrics (--metrics=false), and at 2 CPUs and GOMAXPROCS=2
// with metrics. GOMAXPROCS is set (--gomaxprocs): Go's default would
// round a 1-CPU quota up to 2.

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
)

const (
	scaleClients      = targetEchoClients
	reportMetricsCost = 17 // %, of the echo server's throughput
)

var (
	echoBaseLabel      = fmt.Sprintf("echo, %d clients: gateway 1 CPU, GOMAXPROCS=1, metrics on", scaleClients)
	echoNoMetricsLabel = fmt.Sprintf("echo, %d clients: gateway 1 CPU, GOMAXPROCS=1, metrics off", scaleClients)
	echoTwoProcsLabel  = fmt.Sprintf("echo, %d clients: gateway 2 CPUs, GOMAXPROCS=2, metrics on", scaleClients)
)

// scalingRounds: two in --quick (each order once), three in --full.
func scalingRounds(o lab.Options) int {
	if o.Mode == lab.Full {
		return lab.DefaultMinRounds
	}
	return 2
}

func scalingEstimate(o lab.Options, t timing) time.Duration {
	run, _ := o.MinRun()
	return 3*(o.Warmup()+2*time.Second) + time.Duration(3*scalingRounds(o))*(max(t.echoRun, run)+time.Second)
}

// echoScaling measures the three echo rows in rounds and adds them with
// the metrics' cost and the GOMAXPROCS ratio, each per round.
func (*Experiment) echoScaling(ctx context.Context, run *lab.Run, t timing) error {
	specs := []struct {
		label string
		cpu   float64
		o     gateway.Options
	}{
		{echoBaseLabel, 1, gateway.Options{Config: gateway.Config{Echo: true}, GOMAXPROCS: 1}},
		{echoNoMetricsLabel, 1, gateway.Options{Config: gateway.Config{Echo: true, NoMetrics: true}, GOMAXPROCS: 1}},
		{echoTwoProcsLabel, 2, gateway.Options{Config: gateway.Config{Echo: true}, GOMAXPROCS: 2}},
	}
	var ms []lab.Measurement
	for _, s := range specs {
		g, err := run.StartGateway(ctx, s.cpu, gatewayMemMB, s.o)
		if err != nil {
			return err
		}
		defer g.Stop()
		ms = append(ms, lab.Measurement{Label: s.label, Procs: []*sandbox.Process{g.Proc}, Duration: t.echoRun,
			Driver: Checker{Config: checker.Config{Target: g.GRPC, Scenario: checker.Echo, Streams: scaleClients}}})
	}
	n := scalingRounds(run.Opts)
	rows, err := run.MeasurePaired(ctx, lab.Paired{Measurements: ms, MinRounds: n, MaxRounds: n})
	if err != nil {
		return err
	}
	base, off, two := rows[0], rows[1], rows[2]
	for _, r := range rows {
		r.Note = joinNote(r.Note, echoCPUNote(r))
	}
	off.Note = joinNote(off.Note, metricsCostNote(base, off))
	two.Note = joinNote(two.Note, gomaxprocsNote(base, two))
	for _, r := range rows {
		run.AddRow(r)
	}
	return nil
}

// figure is a run's figure name, when positive, for perRound and
// runFigures.
func figure(name string) func(map[string]float64) (float64, bool) {
	return func(v map[string]float64) (float64, bool) {
		x := v[name]
		return x, x > 0
	}
}

// metricsCostNote sets and says what the metrics cost, per round: the
// share of round trips per gateway CPU-second that switching them off
// gives back, and the share of round trips per second at the quota.
func metricsCostNote(on, off *lab.Row) string {
	perCPU := perRound(on, off, perGatewayCPU("rps"), perGatewayCPU("rps"))
	rps := perRound(on, off, figure("rps"), figure("rps"))
	if len(perCPU) == 0 {
		return fmt.Sprintf("metrics cost: not measured (no gateway CPU figure); the report: ~%d%%", reportMetricsCost)
	}
	cost := func(ratios []float64) []float64 {
		out := make([]float64, len(ratios))
		for i, r := range ratios {
			out[i] = (1 - r) * 100
		}
		return out
	}
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", v) }
	off.Figures["metrics_cost_pct"] = lab.Median(cost(perCPU))
	return fmt.Sprintf("the metrics' cost, against the row with them on, per round: %s of the round trips per gateway CPU-second, %s of those per second at the quota; the report: ~%d%% (of its echo throughput; its instrumentation is not described: ours on this path is a histogram observation per round trip and a gauge per stream, the gateway's own Prometheus series, not gRPC's)",
		spread(cost(perCPU), pct), spread(cost(rps), pct), reportMetricsCost)
}

// gomaxprocsNote sets and says the 2-CPU row's throughput over the
// 1-CPU row's, per round.
func gomaxprocsNote(one, two *lab.Row) string {
	rps := perRound(two, one, figure("rps"), figure("rps"))
	if len(rps) == 0 {
		return "GOMAXPROCS scaling: not measured"
	}
	two.Figures["ratio_to_gomaxprocs_1"] = lab.Median(rps)
	perCPU := perRound(two, one, perGatewayCPU("rps"), perGatewayCPU("rps"))
	return fmt.Sprintf("msgs/s over the GOMAXPROCS=1 row's, per round: %s (linear: 2.00; the report: \"scales almost linearly with GOMAXPROCS\"); per gateway CPU-second: %s. The checker runs in the lab's process on the same 2 cores, so at 2 CPUs the gateway shares them with its load generator: a ratio below 2 is partly the machine",
		spread(rps, hundredths), spread(perCPU, hundredths))
}
