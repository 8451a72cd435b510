package databusexp

// The report's two statements on its echo server beyond the table: it
// "scales almost linearly with GOMAXPROCS", and its metrics cost ~17%.
// Three echo gateways serve 50 clients in rounds, their order
// alternating: at 1 CPU and GOMAXPROCS=1 with metrics (the base), the
// same without metrics (--metrics=false), and at 2 CPUs and GOMAXPROCS=2
// with metrics. GOMAXPROCS is set (--gomaxprocs): Go's default would
// round a 1-CPU quota up to 2. Both statements are shown as ratios of
// the rows, paired by round (scalingRatios). The gateway's floor (hlab
// serve grpcfloor, floor.go) runs in the same rounds, beside the base
// row, on its quota and GOMAXPROCS: the target bounds the base row's
// round trips per CPU-second against the floor's, paired by round.

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

const (
	scaleClients      = targetEchoClients
	reportMetricsCost = 17 // %, of the echo server's throughput
)

// scalingRounds: three in either mode. The target against the floor
// reads the interval of the per-round ratios, and over two pairs it is
// about three times wider than over three (Student's t with one degree of
// freedom against two): too wide to decide a bound 5% below a ratio near 1.
func scalingRounds(lab.Options) int { return lab.DefaultMinRounds }

func scalingEstimate(o lab.Options, t timing) time.Duration {
	run, _ := o.MinRun()
	const rows = 4 // three gateways and the floor
	return rows*(o.Warmup()+2*time.Second) + time.Duration(rows*scalingRounds(o))*(max(t.echoRun, run)+time.Second)
}

// perGatewayCPU is a run's figure fig (per second) per second of its
// gateway's CPU; ok false without the CPU.
func perGatewayCPU(v map[string]float64, fig labresult.Metric) (float64, bool) {
	cpu := v[labresult.CPUAvg.Name]
	return v[fig.Name] / cpu, cpu > 0
}

// perCPURatio is num's round trips per gateway CPU-second over den's,
// from one run of each.
func perCPURatio(num, den map[string]float64) (float64, bool) {
	x, okx := perGatewayCPU(num, labresult.RPS)
	y, oky := perGatewayCPU(den, labresult.RPS)
	return x / y, okx && oky && y > 0
}

// scalingRatios are the report's two statements as ratios of the scaling
// rows, each per round, shown beside the rows.
func scalingRatios() []labresult.Target {
	twoOverOne := fmt.Sprintf("echo at %d clients: the gateway at 2 CPUs and GOMAXPROCS=2 over 1 CPU and GOMAXPROCS=1", scaleClients)
	onOverOff := fmt.Sprintf("echo at %d clients, 1 CPU, GOMAXPROCS=1: the gateway with metrics over without", scaleClients)
	return []labresult.Target{{
		Key:   "echo-gomaxprocs-2-over-1",
		Text:  twoOverOne + ", msgs/s (linear: 2.00; the report: \"scales almost linearly with GOMAXPROCS\")",
		Ratio: &labresult.Ratio{Num: echoTwoProcs, Den: echoBase, Metric: labresult.RPS.Name},
	}, {
		Key:   "echo-gomaxprocs-2-over-1-per-cpu",
		Text:  twoOverOne + ", round trips per gateway CPU-second",
		Ratio: &labresult.Ratio{Num: echoTwoProcs, Den: echoBase, Metric: roundTripsPerCPU.Name, Of: perCPURatio},
	}, {
		Key:   "echo-metrics-on-over-off-per-cpu",
		Text:  fmt.Sprintf("%s, round trips per gateway CPU-second (1 less the metrics' cost; the report: a cost of ~%d%%)", onOverOff, reportMetricsCost),
		Ratio: &labresult.Ratio{Num: echoBase, Den: echoNoMetrics, Metric: roundTripsPerCPU.Name, Of: perCPURatio},
	}, {
		Key:   "echo-metrics-on-over-off",
		Text:  onOverOff + ", msgs/s at the quota",
		Ratio: &labresult.Ratio{Num: echoBase, Den: echoNoMetrics, Metric: labresult.RPS.Name},
	}}
}

// echoScaling measures the three echo rows and the floor's in rounds
// and adds them.
func (b *bench) echoScaling(ctx context.Context) error {
	specs := []struct {
		key   labresult.Key
		cpu   float64
		o     gateway.Options
		floor bool // the floor, on the quota and GOMAXPROCS of o
	}{
		{echoBase, 1, gateway.Options{Config: gateway.Config{Echo: true}, GOMAXPROCS: 1}, false},
		{echoFloor, 1, gateway.Options{GOMAXPROCS: 1}, true},
		{echoNoMetrics, 1, gateway.Options{Config: gateway.Config{Echo: true, NoMetrics: true}, GOMAXPROCS: 1}, false},
		{echoTwoProcs, 2, gateway.Options{Config: gateway.Config{Echo: true}, GOMAXPROCS: 2}, false},
	}
	var ms []lab.Measurement
	for _, s := range specs {
		var g *lab.Gateway
		var err error
		if s.floor {
			g, err = b.startFloor(ctx, s.o.GOMAXPROCS)
		} else {
			g, err = b.run.StartGateway(ctx, s.cpu, gatewayMemMB, s.o)
		}
		if err != nil {
			return err
		}
		defer g.Stop()
		ms = append(ms, lab.Measurement{Key: s.key, Procs: []*sandbox.Process{g.Proc}, Duration: b.t.echoRun,
			Driver: Checker{Config: checker.Config{Target: g.GRPC, Scenario: checker.Echo, Streams: scaleClients}}})
	}
	n := scalingRounds(b.run.Opts)
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms, MinRounds: n, MaxRounds: n})
	if err != nil {
		return err
	}
	for _, r := range rows {
		echoCPU(r)
		switch r.Key {
		case echoNoMetrics:
			r.AddNote("the metrics' cost is shown as the ratio of the row with them on to this one, per round; the report: ~%d%% (of its echo throughput; its instrumentation is not described: ours on this path is a histogram observation per round trip and a gauge per stream, the gateway's own Prometheus series, not gRPC's)", reportMetricsCost)
		case echoFloor:
			r.AddNote("grpc-go and the kernel alone, with the gateway's transport settings: the most the gateway can reach while it keeps grpc-go; the gateway's ratio to it, paired by round, is the target")
		case echoTwoProcs:
			r.AddNote("the checker runs in the lab's process on the same 2 cores, so at 2 CPUs the gateway shares them with its load generator: a ratio to the GOMAXPROCS=1 row below 2 is partly the machine")
		}
		b.run.AddRow(r)
	}
	return nil
}
