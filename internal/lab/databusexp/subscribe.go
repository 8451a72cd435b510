package databusexp

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// The subscribe row: one group of subMembers members drains a topic that
// throughput-optimized publishers filled beforehand, subRounds times, each
// drain a fresh group reading from the start (checker.Only).
const (
	subMembers = 4
	subRounds  = 3
	subBatch   = 100
)

// subFill is how long publishers fill the subscribe topic: a fifth of a
// publish row's run, since each drain reads all of it (bench/databus.sh
// saw ~400,000 messages per second of filling, drained at ~130,000/s).
func subFill(t timing) time.Duration { return t.pubRun / 5 }

// subscribeEstimate is the subscribe rows' time: filling, then a warm-up
// drain and subRounds drains through the gateway, each joining, then
// reading the topic, and as many by the direct consumer, each a process
// that starts, joins and reads the topic several times faster.
func subscribeEstimate(t timing) time.Duration {
	return subFill(t) + (1+subRounds)*(2*time.Second+4*subFill(t)) + (1+subRounds)*(3*time.Second+subFill(t))
}

// subscribe measures and adds the subscribe row, then the rows of
// members that take time over each batch (delays) on its topic. Its gateway CPU covers
// the drains alone: the checker's window (Config.OnWindow) opens as the
// members dial and join and closes once the group has every record, so
// the gateway's cgroup is read over consuming, not over the publishing
// that filled the topic, as when the row came from a throughput row's
// consumers.
func (b *bench) subscribe(ctx context.Context) error {
	topic := b.topic()
	b.run.Progress.Step(subscribeLabel+": filling the topic", subFill(b.t))
	fill, err := checker.Run(ctx, checker.Config{
		Target: b.gw.GRPC, Topic: topic, Brokers: b.k.Brokers, Kafka: b.k.Security, Partitions: partitions,
		Scenario: checker.Throughput, Streams: pubClients, Warmup: -1, Duration: subFill(b.t),
	}, nil)
	if err != nil {
		return fmt.Errorf("lab: databus %s: filling the topic: %w", subscribeLabel, err)
	}
	m := lab.Measurement{Key: subscribeKey, Procs: []*sandbox.Process{b.gw.Proc}, Steady: b.k.JVM,
		Driver: Checker{Gateway: b.gw.Proc, Config: checker.Config{
			Target: b.gw.GRPC, Topic: topic, Brokers: b.k.Brokers, Kafka: b.k.Security, Consume: checker.Only,
			Groups: 1, Members: subMembers, SubBatch: subBatch,
			DrainTimeout: 2 * time.Minute, // what a slow drain misses would count as lost
		}}}
	direct := lab.Measurement{Key: subscribeDirectKey, Steady: b.k.JVM,
		Driver: &directConsumer{b.direct(topic)}}
	// Rounds of the gateway's drain and the direct consumer's, their
	// order alternating (--pairs N makes them N): each drain's figures
	// are kept (Row.PerRun), so that the figures per CPU-second are per
	// drain, then their median, and the cost target pairs the two rows'
	// drains by round.
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{m, direct}, MinRounds: subRounds, MaxRounds: subRounds})
	if err != nil {
		return err
	}
	for _, row := range rows {
		if row.Key == subscribeDirectKey {
			directConsumerNote(row, fill.Acked)
		} else {
			subscribeNote(row, fill.Acked)
		}
		b.run.AddRow(row)
	}
	return b.delays(ctx, topic, fill.Acked)
}

// subscribeNote sets the subscribe row's figures per gateway CPU-second
// (each drain's rate over the cores its gateway used, then the median)
// and says them with their spread and the delivery.
func subscribeNote(row *labresult.Row, filled int64) {
	// A drain times no request: latency here would be invented.
	row.MeanMS, row.P50MS, row.P90MS, row.P95MS, row.P99MS, row.P999MS, row.MaxMS = nil, nil, nil, nil, nil, nil, nil
	cycles := perDrain(row, cyclesPerS)
	msgs := perDrain(row, receivedPerS)
	row.AddNote("messages/s received; %s get-ack cycles/s (a cycle: a batch received, then acked; batches of up to %d); each of %d drains a fresh group reading the %s messages %d throughput-optimized clients published beforehand",
		thousands(int(row.Value(cyclesPerS))), subBatch, len(row.PerRun), thousands(int(filled)), pubClients)
	if len(cycles) == len(row.PerRun) && len(cycles) > 0 && row.CPUAvg != nil {
		row.Set(cyclesPerGatewayCPU, labresult.Median(cycles))
		row.Set(msgsPerGatewayCPU, labresult.Median(msgs))
		row.Set(gatewayCores, *row.CPUAvg)
		row.AddNote("per gateway CPU-second, over the drains alone: get-ack cycles %s and messages %s; the gateway used %.2f cores",
			spread(cycles), spread(msgs), *row.CPUAvg)
	} else {
		row.AddNote("the gateway's CPU was not measured in every drain: no figures per CPU-second")
	}
	if row.Lost != nil {
		verdict := "0 lost"
		if *row.Lost > 0 {
			verdict = fmt.Sprintf("%d LOST", *row.Lost)
		}
		row.AddNote("delivery verified in every drain (every record the topic held, by partition and offset): %s", verdict)
	}
	if c := row.Get(gatewayCPUPerMsg); c != nil {
		row.AddNote("%.2f µs of gateway CPU per message (median over the drains)", *c)
	}
}

// perDrain returns, for each run of row whose gateway CPU was measured,
// its figure fig per second of that CPU.
func perDrain(row *labresult.Row, fig labresult.Metric) []float64 {
	var out []float64
	for _, r := range row.PerRun {
		if v, ok := perGatewayCPU(r.Values, fig); ok {
			out = append(out, v)
		}
	}
	return out
}

// spread formats the median of vs, whole, with their range.
func spread(vs []float64) string {
	whole := func(v float64) string { return thousands(int(math.Round(v))) }
	return fmt.Sprintf("%s (%s-%s, %d runs)", whole(labresult.Median(vs)), whole(slices.Min(vs)), whole(slices.Max(vs)), len(vs))
}
