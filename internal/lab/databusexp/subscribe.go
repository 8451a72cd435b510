package databusexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// The subscribe row: one group of subMembers members drains a topic that
// throughput-optimized publishers filled beforehand, subRounds times, each
// drain a fresh group reading from the start (checker.Only).
const (
	subscribeRow = "subscribe: 1 group x 4 members, draining a filled topic"
	subMembers   = 4
	subRounds    = 3
	subBatch     = 100
)

// subFill is how long publishers fill the subscribe topic: a fifth of a
// publish row's run, since each drain reads all of it (bench/databus.sh
// saw ~400,000 messages per second of filling, drained at ~130,000/s).
func subFill(t timing) time.Duration { return t.pubRun / 5 }

// subscribeEstimate is the subscribe row's time: filling, then a warm-up
// drain and subRounds drains, each joining, then reading the topic.
func subscribeEstimate(t timing) time.Duration {
	return subFill(t) + (1+subRounds)*(2*time.Second+4*subFill(t))
}

// subscribe measures and adds the subscribe row, then the rows of
// members that take time over each batch (delays) on its topic. Its gateway CPU covers
// the drains alone: the checker's window (Config.OnWindow) opens as the
// members dial and join and closes once the group has every record, so
// the gateway's cgroup is read over consuming, not over the publishing
// that filled the topic, as when the row came from a throughput row's
// consumers.
func (*Experiment) subscribe(ctx context.Context, run *lab.Run, gw *lab.Gateway, k *lab.Kafka, topic string, t timing) error {
	run.Progress.Step(subscribeRow+": filling the topic", subFill(t))
	fill, err := checker.Run(ctx, checker.Config{
		Target: gw.GRPC, Topic: topic, Brokers: k.Brokers, Partitions: partitions,
		Scenario: checker.Throughput, Streams: pubClients, Warmup: -1, Duration: subFill(t),
	}, nil)
	if err != nil {
		return fmt.Errorf("lab: databus %s: filling the topic: %w", subscribeRow, err)
	}
	m := lab.Measurement{Label: subscribeRow, Procs: []*sandbox.Process{gw.Proc}, Steady: k.JVM,
		Driver: Checker{Config: checker.Config{
			Target: gw.GRPC, Topic: topic, Brokers: k.Brokers, Consume: checker.Only,
			Groups: 1, Members: subMembers, SubBatch: subBatch,
			DrainTimeout: 2 * time.Minute, // what a slow drain misses would count as lost
		}}}
	// Rounds of one row (--pairs N makes them N): each drain's figures
	// are kept (Row.PerRun), so that the figures per CPU-second are per
	// drain, then their median.
	rows, err := run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{m}, MinRounds: subRounds, MaxRounds: subRounds})
	if err != nil {
		return err
	}
	row := rows[0]
	row.Note = joinNote(row.Note, subscribeNote(row, fill.Acked))
	run.AddRow(row)
	return delays(ctx, run, gw, k, topic, fill.Acked)
}

// subscribeNote sets the subscribe row's figures per gateway CPU-second
// (each drain's rate over the cores its gateway used, then the median)
// and says them with their spread and the delivery.
func subscribeNote(row *lab.Row, filled int64) string {
	// A drain times no request: latency here would be invented.
	row.MeanMS, row.P50MS, row.P90MS, row.P95MS, row.P99MS, row.P999MS, row.MaxMS = nil, nil, nil, nil, nil, nil, nil
	if row.Figures == nil {
		row.Figures = map[string]float64{}
	}
	cycles := runFigures(row, perGatewayCPU("cycles_per_s"))
	msgs := runFigures(row, perGatewayCPU("received_per_s"))
	notes := fmt.Sprintf("messages/s received; %s get-ack cycles/s (a cycle: a batch received, then acked; batches of up to %d); each of %d drains a fresh group reading the %s messages %d throughput-optimized clients published beforehand",
		thousands(int(row.Figures["cycles_per_s"])), subBatch, len(row.PerRun), thousands(int(filled)), pubClients)
	if len(cycles) == len(row.PerRun) && len(cycles) > 0 && row.CPUAvg != nil {
		row.Figures["cycles_per_gateway_cpu_s"] = lab.Median(cycles)
		row.Figures["msgs_per_gateway_cpu_s"] = lab.Median(msgs)
		row.Figures["gateway_cores"] = *row.CPUAvg
		notes += fmt.Sprintf("; per gateway CPU-second, over the drains alone: get-ack cycles %s and messages %s; the gateway used %.2f cores",
			spread(cycles, whole), spread(msgs, whole), *row.CPUAvg)
	} else {
		notes += "; the gateway's CPU was not measured in every drain: no figures per CPU-second"
	}
	if row.Lost != nil {
		verdict := "0 lost"
		if *row.Lost > 0 {
			verdict = fmt.Sprintf("%d LOST", *row.Lost)
		}
		notes += fmt.Sprintf("; delivery verified in every drain (every record the topic held, by partition and offset): %s", verdict)
	}
	return notes + "; no target is stated for subscribe"
}

// perGatewayCPU is a run's figure fig (per second) per second of its
// gateway's CPU, for runFigures.
func perGatewayCPU(fig string) func(map[string]float64) (float64, bool) {
	return func(v map[string]float64) (float64, bool) {
		cpu := v["cpu_avg"]
		return v[fig] / cpu, cpu > 0
	}
}
