package databusexp

// The report's consumer tests beyond the subscribe row: members that
// take time to process each batch (the checker's --delay), and its
// lesson that Kafka's default fetch buffers (50 MB) blow a gateway's
// memory: the gateway's RSS while many groups drain a filled topic, with
// --fetch-max-bytes 32 KiB (ours, the report's choice) against 50 MB.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// processDelays are the per-batch processing times of the delay rows;
// 0 is the subscribe row itself.
var processDelays = []time.Duration{time.Millisecond, 10 * time.Millisecond}

// The fetch-buffer rows: one member per group (a group's streams on one
// gateway share one Kafka client, so groups are what multiply fetch
// buffers), each group reading the whole topic.
const (
	fetchSmall = 32 << 10 // the gateway's default, the report's choice
	fetchLarge = 50 << 20 // franz-go's FetchMaxBytes default, the report's first setting
)

// fetchGroups is the same in both modes: at 50 MB each group's member
// holds about the whole topic, some 80 MB for 120,000 messages, and 10
// groups over a topic of 250,000 had the gateway killed at its 2 GB.
func fetchGroups(lab.Options) int { return 10 }

// fetchFill is how long throughput-optimized producers fill the fetch
// rows' topic straight to Kafka (some 100,000 messages: each group
// drains all of them).
func fetchFill(lab.Options) time.Duration { return 100 * time.Millisecond }

func delayRounds(o lab.Options) int {
	if o.Mode == lab.Full {
		return subRounds
	}
	return 1
}

func consumerEstimate(o lab.Options, t timing) time.Duration {
	// A 10 ms delay drains at some 40,000 messages/s (4 members,
	// batches of 100): 10 s for a quick fill.
	delays := time.Duration(delayRounds(o)) * (6*time.Second + 4*subFill(t))
	fetch := 2*(3*time.Second) + fetchFill(o) + time.Duration(2*fetchGroups(o))*time.Second
	return delays + fetch
}

// delays drains the subscribe row's topic with members that take time
// over each batch before acking it, in rounds, on the subscribe row's
// gateway (warmed by it).
func (b *bench) delays(ctx context.Context, topic string, filled int64) error {
	var ms []lab.Measurement
	for _, d := range processDelays {
		ms = append(ms, lab.Measurement{Key: delayKey(d), Procs: []*sandbox.Process{b.gw.Proc}, Steady: b.k.JVM, NoWarmup: true,
			Driver: Checker{Config: checker.Config{
				Target: b.gw.GRPC, Topic: topic, Brokers: b.k.Brokers, Kafka: b.k.Security, Consume: checker.Only,
				Groups: 1, Members: subMembers, SubBatch: subBatch, ProcessDelay: d,
				DrainTimeout: 2 * time.Minute,
			}}})
	}
	n := delayRounds(b.run.Opts)
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms, MinRounds: n, MaxRounds: n})
	if err != nil {
		return err
	}
	measured := byKey(rows)
	for _, d := range processDelays {
		row := measured[delayKey(d)]
		bound := float64(subMembers*subBatch) / d.Seconds()
		row.AddNote("each member sleeps %v per batch before acking it: at most %s messages/s for %d members if a batch were always full and nothing else took time; the 0 ms row is %q",
			d, thousands(int(bound)), subMembers, subscribeLabel)
		subscribeNote(row, filled)
		b.run.AddRow(row)
	}
	return nil
}

// fetchMemory fills a topic, then has fetchGroups groups drain it through
// a gateway at each --fetch-max-bytes, in rounds, and adds the rows: the
// gateway's RSS over the drain and its growth per group (the ratio of
// the two rows' peaks is a target shown beside them).
func (b *bench) fetchMemory(ctx context.Context) error {
	o, topic := b.run.Opts, b.topic()
	var ms []lab.Measurement
	idle := map[labresult.Key]float64{} // the gateway's RSS before its first drain, MB
	var filled int64
	for _, bytes := range []int32{fetchSmall, fetchLarge} {
		opts := onKafka(b.k)
		opts.FetchMaxBytes = bytes
		opts.MaxKafkaClients = fetchGroups(o) + 10
		g, err := b.run.StartGateway(ctx, gatewayCPU, gatewayMemMB, opts)
		if err != nil {
			return err
		}
		defer g.Stop()
		if bytes == fetchSmall {
			if filled, err = b.fillFetchTopic(ctx, topic); err != nil {
				return err
			}
		}
		if rss, err := checker.GatewayRSS(ctx, g.URL("/metrics")); err == nil {
			idle[fetchKey(bytes)] = float64(rss) / (1 << 20)
		}
		ms = append(ms, lab.Measurement{Key: fetchKey(bytes), Procs: []*sandbox.Process{g.Proc}, NoWarmup: true,
			Driver: Checker{Config: checker.Config{
				Target: g.GRPC, Topic: topic, Brokers: b.k.Brokers, Kafka: b.k.Security, Consume: checker.Only,
				Groups: fetchGroups(o), Members: 1, SubBatch: subBatch, DrainTimeout: 2 * time.Minute,
			}}})
	}
	n := delayRounds(o)
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms, MinRounds: n, MaxRounds: n})
	if errors.Is(err, lab.ErrServiceDied) {
		// The lesson at its strongest: the rows so far are in the result,
		// the dead gateway's marked; the experiment goes on.
		b.run.Note("subscribe memory: a gateway died while %d groups drained a topic of %s messages (its row says which and why: at 50 MB fetch buffers, the memory limit is the report's lesson); no RSS ratio", fetchGroups(o), thousands(int(filled)))
		return nil
	}
	if err != nil {
		return err
	}
	for _, row := range rows {
		fetchNote(row, idle[row.Key], fetchGroups(o), filled)
		b.run.AddRow(row)
	}
	return nil
}

// fillFetchTopic fills the fetch rows' topic straight to Kafka (the checker's
// direct producers): filling through one of the two gateways would grow
// its RSS alone. It returns the messages acked.
func (b *bench) fillFetchTopic(ctx context.Context, topic string) (int64, error) {
	label := fetchLabel(b.run.Opts, fetchSmall) + ": filling the topic"
	b.run.Progress.Step(label, fetchFill(b.run.Opts)+2*time.Second)
	fill, err := checker.Run(ctx, checker.Config{
		Direct: true, Topic: topic, Brokers: b.k.Brokers, Kafka: b.k.Security, Partitions: partitions,
		Scenario: checker.Throughput, Streams: pubClients, Warmup: -1, Duration: fetchFill(b.run.Opts),
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("lab: databus %s: %w", label, err)
	}
	return fill.Acked, nil
}

// fetchNote says a fetch row's memory: the peak over the drains, and its
// growth over the idle gateway per group.
func fetchNote(row *labresult.Row, idleMB float64, groups int, filled int64) {
	// A drain times no request: latency here would be invented.
	row.MeanMS, row.P50MS, row.P90MS, row.P95MS, row.P99MS, row.P999MS, row.MaxMS = nil, nil, nil, nil, nil, nil, nil
	row.AddNote("%d groups of one member each (a group's streams on a gateway share one Kafka client: groups multiply fetch buffers) each drain the %s messages of a topic filled beforehand (straight to Kafka); RSS sampled over the drains", groups, thousands(int(filled)))
	if row.RSSMBMax != nil && idleMB > 0 {
		row.Set(rssIdleMB, idleMB)
		row.Set(rssMBPerGroup, (*row.RSSMBMax-idleMB)/float64(groups))
		row.AddNote("peak %.0f MB against %.0f MB idle: %.2f MB per group", *row.RSSMBMax, idleMB, row.Value(rssMBPerGroup))
	}
	if row.Lost != nil {
		row.AddNote("delivery verified (every group, every record): %d lost", *row.Lost)
	}
}
