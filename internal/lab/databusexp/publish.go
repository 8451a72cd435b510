package databusexp

// Publishing through Kafka: the claims' four rows (many small-batch
// clients, and latency-optimized ones, each with aggregation off and
// on), in rounds, every run verified; then the throughput-optimized rows.

import (
	"context"
	"fmt"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// publish is the row key publishing through the shared gateway on a
// fresh topic, the gateway's CPU per message measured in each run.
func (b *bench) publish(key labresult.Key, cfg checker.Config) lab.Measurement {
	cfg.Target, cfg.Topic, cfg.Brokers, cfg.Partitions = b.gw.GRPC, b.topic(), b.k.Brokers, partitions
	return lab.Measurement{Key: key, Procs: []*sandbox.Process{b.gw.Proc}, Duration: b.t.pubRun, Steady: b.k.JVM,
		Driver: Checker{Config: cfg, Metrics: b.gw.URL("/metrics"), Gateway: b.gw.Proc}}
}

// claimRows measures the claims' four rows in rounds.
func (b *bench) claimRows(ctx context.Context) error {
	var ms []lab.Measurement
	for _, agg := range []bool{false, true} {
		// Verified by a group that reads once publishing ended, so that it
		// does not compete with the publishers.
		ms = append(ms, b.publish(smallKey(agg), checker.Config{
			Scenario: checker.Throughput, Streams: smallClients, Batch: 1, Inflight: 16, Aggregation: agg,
			Groups: 1, Members: 4, Consume: checker.After, SubBatch: 100,
		}))
	}
	for _, agg := range []bool{false, true} {
		// Consumers beside the publishers: end-to-end latency, verified.
		ms = append(ms, b.publish(pubKey(latencyOpt, agg), checker.Config{
			Scenario: checker.Latency, Streams: pubClients, Aggregation: agg, Groups: 1, Members: 2,
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

// throughput measures the throughput-optimized rows, aggregation off
// (verified) and on.
func (b *bench) throughput(ctx context.Context) error {
	for _, agg := range []bool{false, true} {
		cfg := checker.Config{Scenario: checker.Throughput, Streams: pubClients, Aggregation: agg}
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
