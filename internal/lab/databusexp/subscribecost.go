package databusexp

// The gateway's subscribe cost against consumers that read Kafka
// themselves: a franz-go group member per member, set up as the
// gateway's own member, acking each batch as the checker's subscribers
// do and committing only what it acked (databus-checker --direct
// --consume only), draining the subscribe row's topic in rounds with the
// gateway's drains; the target is their CPU per message, paired by
// round. The direct consumer runs as a process of its own at 1 CPU, as
// the gateway does, and its CPU is the kernel's count for that process.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

const subscribeDirectKey labresult.Key = "subscribe-cost/direct"

var subscribeDirectLabel = fmt.Sprintf("subscribe cost: direct franz-go consumer, 1 group x %d members draining the same topic (its own process, 1 CPU)", subMembers)

// targetSubscribeCostRatio bounds the gateway's CPU per delivered
// message over the direct consumer's.
const targetSubscribeCostRatio = 1.3

// The direct consumer's figures.
var (
	consumerCPU = labresult.Metric{Name: "consumer_cpu_cores", Unit: "cores", Better: labresult.Neither,
		Doc: "CPU of the direct consumer's process over its drain"}
	consumerCPUPerMsg = labresult.Metric{Name: "consumer_cpu_us_per_msg", Unit: "µs", Better: labresult.Lower,
		Doc: "the direct consumer's CPU per message received and acked, from its process over each drain"}
)

// subscribeCostTarget is the subscribe cost's target.
func subscribeCostTarget() labresult.Target {
	return labresult.Target{
		Key: "subscribe-cost-cpu-per-msg",
		Text: fmt.Sprintf("subscribe cost: the gateway's CPU per delivered message at most %.1fx a direct franz-go consumer's (1 group x %d members draining a filled topic, batches of %d acked as they come, committing only what was acked, each at 1 CPU, through the run's Kafka, drains alternating, paired by round)",
			targetSubscribeCostRatio, subMembers, subBatch),
		Ratio: &labresult.Ratio{Num: subscribeKey, Den: subscribeDirectKey, Metric: gatewayCPUPerMsg.Name, DenMetric: consumerCPUPerMsg.Name},
		Bound: labresult.AtMost(targetSubscribeCostRatio),
	}
}

// directConsumer runs "hlab databus-checker --direct --consume only" as
// a process of its own at 1 CPU for each run: a fresh group of
// subMembers members drains topic straight from Kafka.
type directConsumer struct{ directClient }

func (c *directConsumer) Drive(ctx context.Context, _ time.Duration, window func(bool)) (*lab.Sample, error) {
	res, usage, err := c.check(ctx, "direct-consumer", window, "--consume", string(checker.Only),
		"--groups", "1", "--members", strconv.Itoa(subMembers), "--sub-batch", strconv.Itoa(subBatch), "--drain-timeout", "2m")
	if err != nil {
		return nil, err
	}
	s := CheckerSample(res)
	s.Figures[consumerCPU.Name] = usage.CPUAvg
	if d := res.Delivery; d != nil && d.ReceivedPerSec > 0 {
		s.Figures[consumerCPUPerMsg.Name] = usage.CPUAvg / d.ReceivedPerSec * 1e6
	}
	return s, nil
}

// directConsumerNote shows the direct consumer's CPU as the table's CPU
// and says what ran.
func directConsumerNote(row *labresult.Row, filled int64) {
	// A drain times no request: latency here would be invented.
	row.MeanMS, row.P50MS, row.P90MS, row.P95MS, row.P99MS, row.P999MS, row.MaxMS = nil, nil, nil, nil, nil, nil, nil
	if c := row.Get(consumerCPU); c != nil {
		row.CPUAvg = labresult.F(*c)
	}
	row.AddNote("franz-go straight from Kafka in a process of its own at 1 CPU (hlab databus-checker --direct --consume only): a group member per member with the gateway's balancer and fetch sizes, batches of up to %d acked as they come, only acked records committed; each of %d drains a fresh group reading the %s messages of %q's topic; %.2f µs of CPU per message (%.2f cores)",
		subBatch, len(row.PerRun), thousands(int(filled)), subscribeLabel, row.Value(consumerCPUPerMsg), row.Value(consumerCPU))
	if row.Lost != nil {
		row.AddNote("delivery verified in every drain (every record the topic held, by partition and offset): %d lost", *row.Lost)
	}
}
