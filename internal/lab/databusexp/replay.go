package databusexp

// A replay from a timestamp (x-databus-start-time): the gateway reads
// the topic outside any group from each partition's first message at or
// after the time, and with x-databus-replay-end: now stops at the end the
// topic had when the replay opened. The row checks it delivers exactly
// the messages stamped at or after the time, and how fast.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

const replayKey labresult.Key = "replay/from-time"

// replayMessages are the row's messages, half stamped before the time and
// half at it.
func replayMessages(o lab.Options) int {
	switch {
	case o.Mode == lab.Full:
		return 200000
	case o.Short: // tests of the wiring
		return 2000
	}
	return 20000
}

func replayLabel(o lab.Options) string {
	return fmt.Sprintf("ours: a replay from a timestamp delivers exactly the messages stamped at or after it (%s messages in two halves, stamped 1 ms before it and at it; replayed through the gateway to the topic's end)", thousands(replayMessages(o)))
}

var replayExtra = labresult.Metric{Name: "replay_extra", Better: labresult.Lower,
	Doc: "messages a replay delivered that it should not have: stamped before its start time, or delivered twice"}

func replayRow(o lab.Options) lab.RowSpec { return lab.Row(replayKey, replayLabel(o)) }

func replayTargets() []labresult.Target {
	return []labresult.Target{{
		Key:    "replay-from-time-missing",
		Text:   "a replay from a timestamp: 0 messages stamped at or after it missing",
		Row:    replayKey,
		Metric: labresult.Lost.Name,
		Bound:  labresult.AtMost(0),
	}, {
		Key:    "replay-from-time-extra",
		Text:   "a replay from a timestamp: 0 messages from before it, none twice",
		Row:    replayKey,
		Metric: replayExtra.Name,
		Bound:  labresult.AtMost(0),
	}}
}

// replayFromTime fills a topic straight in Kafka, its halves stamped
// around a time T, and replays it from T to its end through a gateway of
// its own under the experiment's quota.
func (b *bench) replayFromTime(ctx context.Context) error {
	run := b.run
	n := replayMessages(run.Opts)
	run.Progress.Step(run.Label(replayKey), replayEstimate)
	topic := b.topic()
	if err := b.k.CreateTopic(ctx, topic, partitions); err != nil {
		return err
	}
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	if err := b.fillStamped(ctx, topic, n, at); err != nil {
		return err
	}
	g, err := run.StartGateway(ctx, gatewayCPU, gatewayMemMB, onKafka(b.k))
	if err != nil {
		return err
	}
	defer g.Stop()
	c, err := databus.Dial(g.GRPC)
	if err != nil {
		return err
	}
	defer c.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	sub, err := c.OpenReplay(rctx, topic, databus.FromTime(at).UntilNow(), databus.BatchSize(500))
	if err != nil {
		return err
	}
	defer sub.Close()
	got := make(map[int]int, n/2)
	delivered := 0
	for {
		batch, err := sub.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		for _, d := range batch.Messages {
			k, _ := strconv.Atoi(string(d.Key))
			got[k]++
		}
		delivered += len(batch.Messages)
	}
	took := time.Since(start)
	missing, extra := int64(0), 0
	for k := n / 2; k < n; k++ {
		if got[k] == 0 {
			missing++
		}
	}
	for k, c := range got {
		if k < n/2 {
			extra += c
		} else {
			extra += c - 1
		}
	}
	row := lab.NewRow(replayKey)
	row.Model, row.Runs, row.Connections, row.Requests = "replay", 1, 1, int64(delivered)
	row.RPS, row.Lost = labresult.F(float64(delivered)/took.Seconds()), &missing
	row.Set(replayExtra, float64(extra))
	row.Set(received, float64(delivered))
	row.AddNote("%d messages published straight to Kafka (%d partitions), half stamped 1 ms before T, half at T; a replay from T with x-databus-replay-end: now delivered %d in %.2f s (batches of 500, the stream opening included): %d of the %d at or after T missing, %d extra", n, partitions, delivered, took.Seconds(), missing, n/2, extra)
	run.AddRow(row)
	return nil
}

// fillStamped writes keys 0..n-1 to topic, the first half stamped 1 ms
// before at and the second at it: the edge a replay from at must cut.
func (b *bench) fillStamped(ctx context.Context, topic string, n int, at time.Time) error {
	cl, err := b.k.NewClient(kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	value := make([]byte, 100)
	recs := make([]*kgo.Record, 0, 1000)
	for i := 0; i < n; i++ {
		ts := at
		if i < n/2 {
			ts = at.Add(-time.Millisecond)
		}
		recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value, Timestamp: ts})
		if len(recs) == cap(recs) || i == n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return fmt.Errorf("replay row: fill: %w", err)
			}
			recs = recs[:0]
		}
	}
	return nil
}

// replayEstimate is the row's time: the fill, a gateway's start, the
// replay.
const replayEstimate = 20 * time.Second
