package databusexp

// The report's echo table: 1 to 100 clients, one message per request,
// each answer awaited, through a gateway that echoes (no Kafka): the
// transport alone. The report's instance had 4 cores, ours 1 CPU, so
// the comparison is per core.

import (
	"context"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// The report's echo table: clients -> messages/s, 4 cores, and the
// seconds its clients took for 100,000 messages each.
var (
	echoClients = []int{1, 2, 5, 10, 20, 50, 100}
	echoRef     = map[int]float64{1: 28373, 2: 54989, 5: 105607, 10: 160678, 20: 232907, 50: 300808, 100: 339664}
	echoSeconds = map[int]float64{1: 3.52, 2: 3.63, 5: 4.73, 10: 6.22, 20: 8.58, 50: 16.62, 100: 29.44}
)

// echoMessagesPerClient is what each of the report's echo clients sent.
const echoMessagesPerClient = 100000

const reportCores = 4

// echo measures the echo table's rows on one echo gateway.
func (b *bench) echo(ctx context.Context) error {
	gw, err := b.run.StartGateway(ctx, gatewayCPU, gatewayMemMB, gateway.Options{Config: gateway.Config{Echo: true}})
	if err != nil {
		return err
	}
	defer gw.Stop()
	for _, n := range echoClients {
		row, err := b.run.Measure(ctx, lab.Measurement{Key: echoKey(n), Procs: []*sandbox.Process{gw.Proc}, Duration: b.t.echoRun,
			Driver: Checker{Config: checker.Config{Target: gw.GRPC, Scenario: checker.Echo, Streams: n}, Metrics: gw.URL("/metrics")}})
		if err != nil {
			return err
		}
		perCore := echoRef[n] / reportCores
		row.AddNote("per core: report %s msg/s (4 cores), ours %s at 1 CPU", thousands(int(perCore)), thousands(int(row.Value(labresult.RPS))))
		if row.RPS != nil {
			row.Set(ratioToReportPerCore, *row.RPS/perCore)
		}
		echoCPU(row)
		b.run.AddRow(row)
	}
	return nil
}

// echoCPU sets an echo row's round trips per second of gateway CPU (the
// row's rps over the cores its gateway used, read from its cgroup) and
// says it; nothing when the CPU was not measured.
func echoCPU(row *labresult.Row) {
	if row.CPUAvg == nil || row.RPS == nil || *row.RPS <= 0 || *row.CPUAvg <= 0 {
		return
	}
	perCPU := *row.RPS / *row.CPUAvg
	row.Set(roundTripsPerCPU, perCPU)
	row.AddNote("per gateway CPU-second: %s round trips, %.1f µs of CPU each (%.2f cores)", thousands(int(perCPU)), 1e6/perCPU, *row.CPUAvg)
}
