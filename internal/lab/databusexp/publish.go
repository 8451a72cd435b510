package databusexp

// Publishing through Kafka: the claims' four rows (many small-batch
// clients, and latency-optimized ones, each with aggregation off and
// on, every stream awaiting each answer as the report's checker did), in
// rounds, every run verified; then ours, pipelined: the small-batch
// clients with 16 requests in flight, and the throughput-optimized rows.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// publish is the row key publishing through the shared gateway on a
// fresh topic, the gateway's CPU per message measured in each run.
func (b *bench) publish(key labresult.Key, cfg checker.Config) lab.Measurement {
	cfg.Target, cfg.Topic, cfg.Brokers, cfg.Partitions = b.gw.GRPC, b.topic(), b.k.Brokers, partitions
	cfg.Kafka = b.k.Security
	return lab.Measurement{Key: key, Procs: []*sandbox.Process{b.gw.Proc}, Duration: b.t.pubRun, Steady: b.k.JVM,
		Driver: Checker{Config: cfg, Metrics: b.gw.URL("/metrics"), Gateway: b.gw.Proc}}
}

// smallBatch is the small-batch clients' run with inflight requests in
// flight per stream, verified by a group that reads once publishing
// ended, so that it does not compete with the publishers.
func smallBatch(agg bool, inflight int) checker.Config {
	return checker.Config{
		Scenario: checker.Throughput, Streams: smallClients, Batch: 1, Inflight: inflight, Aggregation: agg,
		MessageBytes: recordBytes, Groups: 1, Members: 4, Consume: checker.After, SubBatch: 100,
	}
}

// claimRows measures the claims' four rows in rounds.
func (b *bench) claimRows(ctx context.Context) error {
	var ms []lab.Measurement
	for _, agg := range []bool{false, true} {
		m := b.publish(smallKey(agg), smallBatch(agg, reportInflight))
		b.firstClaimSetup(m)
		ms = append(ms, m)
	}
	for _, agg := range []bool{false, true} {
		// Consumers beside the publishers: end-to-end latency, verified.
		ms = append(ms, b.publish(pubKey(latencyOpt, agg), checker.Config{
			Scenario: checker.Latency, Streams: pubClients, Inflight: reportInflight, Aggregation: agg, Groups: 1, Members: 2,
		}))
	}
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms})
	if err != nil {
		return err
	}
	for _, row := range rows {
		publishNote(row)
		b.run.AddRow(row)
	}
	return nil
}

// firstClaimSetup records the settings a row of the first claim runs
// with, the checker's as m passes them, against what the Spec declares
// (setup.go).
func (b *bench) firstClaimSetup(m lab.Measurement) {
	c := m.Driver.(Checker).Config
	b.run.UsedInFirstClaim(setupInflight, strconv.Itoa(c.Inflight))
	b.run.UsedInFirstClaim(setupBatch, strconv.Itoa(c.Batch))
	b.run.UsedInFirstClaim(setupClients, clientsSetup(c.Streams, c.Connections))
	b.run.UsedInFirstClaim(setupMessage, messageSetup(c.MessageBytes))
	b.run.UsedInFirstClaim(setupTopic, topicSetup(c.Partitions))
	b.run.UsedInFirstClaim(setupDurations, durationsSetup(b.run.Opts, m.Duration))
}

// pipelined measures ours: the claims' small-batch clients with 16
// requests in flight per stream, one run each (Repeat for more), on the
// gateway the claims' rows warmed; their ratios are shown, not judged.
func (b *bench) pipelined(ctx context.Context) error {
	for _, agg := range []bool{false, true} {
		m := b.publish(pipelinedKey(agg), smallBatch(agg, pipelinedInflight))
		// The claims' rows just ran the same streams on this gateway, and
		// each checker run has its own warm-up after its streams open.
		m.NoWarmup = true
		row, err := b.run.Measure(ctx, m)
		if err != nil {
			return err
		}
		publishNote(row)
		b.run.AddRow(row)
	}
	return nil
}

// pipelinedRatios are ours: what aggregation does for the small-batch
// clients when each keeps 16 requests in flight, shown beside the rows.
func pipelinedRatios() []labresult.Target {
	return []labresult.Target{{
		Key:   "ours-pipelined-aggregation-rps",
		Text:  fmt.Sprintf("ours: %d small-batch clients with %d requests in flight per stream (not the report's loop): throughput with aggregation over without", smallClients, pipelinedInflight),
		Ratio: &labresult.Ratio{Num: pipelinedKey(true), Den: pipelinedKey(false), Metric: labresult.RPS.Name},
	}, {
		Key:   "ours-pipelined-aggregation-produce-per-msg",
		Text:  fmt.Sprintf("ours: the same clients, %d in flight: Kafka produce requests per message with aggregation over without (a stream's own producer batches what its stream pipelines)", pipelinedInflight),
		Ratio: &labresult.Ratio{Num: pipelinedKey(true), Den: pipelinedKey(false), Metric: kafkaProducePerMsg.Name},
	}}
}

// throughput measures the throughput-optimized rows, aggregation off
// (verified) and on: ours, pipelined.
func (b *bench) throughput(ctx context.Context) error {
	for _, agg := range []bool{false, true} {
		cfg := checker.Config{Scenario: checker.Throughput, Streams: pubClients, Inflight: pipelinedInflight, Aggregation: agg}
		if !agg {
			// Verified by consumers that start once publishing ended.
			cfg.Groups, cfg.Members, cfg.Consume, cfg.SubBatch = 1, 4, checker.After, 100
		}
		row, err := b.run.Measure(ctx, b.publish(pubKey(throughputOpt, agg), cfg))
		if err != nil {
			return err
		}
		publishNote(row)
		b.run.AddRow(row)
		if !agg && !throughputJudged(b.run.Opts) {
			b.run.Note("the throughput-optimized publish target (>= %s msgs/s at 1 CPU) is judged through kfake; through this run's Kafka the row measured %s",
				thousands(targetThroughput), thousands(int(row.Value(labresult.RPS))))
		}
	}
	return nil
}

// publishNote says what a publish row's figures mean beyond the table:
// the load on Kafka, the gateway's CPU per message, the delivery.
func publishNote(row *labresult.Row) {
	if f := row.Get(kafkaProducePerS); f != nil {
		row.AddNote("the gateway sent Kafka %s produce requests/s, %.2f per message", thousands(int(*f)), row.Value(kafkaProducePerMsg))
	}
	if us := row.Get(gatewayCPUPerMsg); us != nil && row.CPUAvg != nil {
		// What a message costs the gateway, whether or not it had its whole
		// CPU: the figure that survives a busy machine and a load generator
		// that cannot keep up.
		row.AddNote("the gateway spent %.1f µs of CPU per message (%.2f cores)", *us, *row.CPUAvg)
	}
	if row.Lost != nil {
		verdict := "0 lost"
		if *row.Lost > 0 {
			verdict = fmt.Sprintf("%d LOST", *row.Lost)
		}
		row.AddNote("delivery verified in every run: %s, %.0f duplicates (median run)", verdict, row.Value(duplicates))
	}
	if e2e := row.Get(e2eP99MS); e2e != nil {
		row.AddNote("end to end p50 %.2f ms, p99 %.2f ms", row.Value(e2eP50MS), *e2e)
	}
}
