package databusexp

// One topic against ten at the same number of partitions in all: report
// D could not write more than 1M rps to one topic of 21 partitions, and
// ten topics (with a checker that could write them) fixed it.

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// The rows' shape: the same clients and 20 partitions in all, on one
// topic or spread over ten (the report's 21 does not split in ten).
const (
	topicsStreams    = 20
	topicsPartitions = 20
	topicsMany       = 10
)

func topicsKey(n int) labresult.Key {
	return labresult.Key(fmt.Sprintf("topics/%dx%d", n, topicsPartitions/n))
}

func topicsLabel(n int) string {
	where := fmt.Sprintf("one topic of %d partitions", topicsPartitions)
	if n > 1 {
		where = fmt.Sprintf("%d topics of %d partitions (%d in all), the streams taken in turn", n, topicsPartitions/n, topicsPartitions)
	}
	return fmt.Sprintf("many topics: %d throughput-optimized clients (batches of 100, %d in flight), aggregation off, on %s", topicsStreams, pipelinedInflight, where)
}

// topicsCounts are the rows' numbers of topics, in the order they run.
var topicsCounts = []int{1, topicsMany}

func topicsEstimate(o lab.Options) time.Duration {
	run, _ := o.MinRun()
	return time.Duration(len(topicsCounts)*o.Repeats()) * (max(compressionRun, run) + 2*time.Second)
}

// manyTopics measures one topic against ten through the shared gateway.
// Nothing consumes: delivery over several topics is the checker's own
// test, and the rows measure what publishing gets.
func (b *bench) manyTopics(ctx context.Context) error {
	for _, n := range topicsCounts {
		cfg := checker.Config{Scenario: checker.Throughput, Streams: topicsStreams, Inflight: pipelinedInflight}
		m := b.publish(topicsKey(n), cfg)
		d := m.Driver.(Checker)
		d.Config.Partitions = topicsPartitions / n
		if n > 1 {
			d.Config.TopicCount = n
			for i := range n {
				b.topics = append(b.topics, fmt.Sprintf("%s-%d", d.Config.Topic, i))
			}
		}
		m.Driver, m.Duration, m.NoWarmup = d, compressionRun, true
		row, err := b.run.Measure(ctx, m)
		if err != nil {
			return err
		}
		publishNote(row)
		b.run.AddRow(row)
	}
	return nil
}

// topicsRatio is shown beside the rows: throughput on ten topics over one.
func topicsRatio() labresult.Target {
	return labresult.Target{
		Key:   "topics-ten-over-one-rps",
		Text:  fmt.Sprintf("%d topics of %d partitions over one of %d: publish throughput (report D: one topic of 21 partitions capped writes near 1M rps; ten topics fixed it; the cap was its cluster's, far above one gateway at 1 CPU)", topicsMany, topicsPartitions/topicsMany, topicsPartitions),
		Ratio: &labresult.Ratio{Num: topicsKey(topicsMany), Den: topicsKey(1), Metric: labresult.RPS.Name},
	}
}
