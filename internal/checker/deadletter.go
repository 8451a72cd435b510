package checker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// deadLetters reads the dead-letter topic (Config.DeadLetterTopic)
// straight from Kafka while the run goes on, from its start, and records
// this run's dead letters in the ledger: the original message by its
// metaHeader (a dead letter keeps the original's headers), the group by
// its databus-consumer-group header, and its delivery count. Dead letters
// of other runs (the topic outlives runs) are skipped.
type deadLetters struct {
	cfg    *Config
	run    uint64
	led    *ledger
	groups map[string]int // group name to its index in the ledger
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once

	mu   sync.Mutex
	next map[int32]int64 // by partition, the offset after the last record read

	others    atomic.Int64 // dead letters of other runs or groups
	malformed atomic.Int64 // records without the headers a dead letter carries
}

// deadLetterReadTimeout bounds, at the end of a run, the wait for the
// reader to reach the dead-letter topic's end offsets.
const deadLetterReadTimeout = 15 * time.Second

// startDeadLetters starts reading cfg.DeadLetterTopic; groups are the
// run's group names, in the ledger's order.
func startDeadLetters(ctx context.Context, cfg *Config, run uint64, led *ledger, groups []string) (*deadLetters, error) {
	cl, err := newKafkaClient(cfg.Brokers, cfg.kafkaOpts, kgo.ConsumeTopics(cfg.DeadLetterTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	d := &deadLetters{cfg: cfg, run: run, led: led, groups: map[string]int{}, cl: cl, done: make(chan struct{}), next: map[int32]int64{}}
	for i, g := range groups {
		d.groups[g] = i
	}
	ctx, d.cancel = context.WithCancel(ctx)
	go d.read(ctx)
	return d, nil
}

func (d *deadLetters) read(ctx context.Context) {
	defer close(d.done)
	for ctx.Err() == nil {
		fs := d.cl.PollFetches(ctx)
		fs.EachRecord(d.record)
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if n := len(p.Records); n > 0 {
				d.mu.Lock()
				d.next[p.Partition] = p.Records[n-1].Offset + 1
				d.mu.Unlock()
			}
		})
	}
}

// record counts one record of the dead-letter topic.
func (d *deadLetters) record(r *kgo.Record) {
	var meta, group, count []byte
	for _, h := range r.Headers {
		switch h.Key {
		case metaHeader:
			meta = h.Value
		case databusv1.HeaderConsumerGroup:
			group = h.Value
		case databusv1.HeaderDeliveryCount:
			count = h.Value
		}
	}
	run, id, _, ok := decodeMeta(meta)
	if !ok || run != d.run {
		d.others.Add(1)
		return
	}
	g, ok := d.groups[string(group)]
	if !ok {
		d.others.Add(1)
		return
	}
	n, err := strconv.ParseUint(string(count), 10, 32)
	if err != nil {
		d.malformed.Add(1)
	}
	d.led.deadLetter(g, id, uint32(n))
}

// stop waits until the reader has read the dead-letter topic up to the
// end offsets it has now (everything dead-lettered before the run's
// consumers stopped), then stops it.
func (d *deadLetters) stop(ctx context.Context) error {
	defer d.close()
	ctx, cancel := context.WithTimeout(ctx, deadLetterReadTimeout)
	defer cancel()
	ends, err := kadm.NewClient(d.cl).ListEndOffsets(ctx, d.cfg.DeadLetterTopic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("checker: the dead-letter topic %q's end offsets: %w", d.cfg.DeadLetterTopic, err)
	}
	for {
		behind := 0
		d.mu.Lock()
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > d.next[o.Partition] {
				behind++
			}
		})
		d.mu.Unlock()
		if behind == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checker: the dead-letter topic %q: %d partition(s) not read to their end in %v", d.cfg.DeadLetterTopic, behind, deadLetterReadTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// groupNames are the run's groups' names, in the ledger's order.
func groupNames(cfg *Config, run uint64) []string {
	out := make([]string, cfg.Groups)
	for g := range out {
		out[g] = groupOf(cfg, run, g)
	}
	return out
}

// close stops the reader at once; stop waits for the topic's end first.
func (d *deadLetters) close() {
	d.closed.Do(func() {
		d.cancel()
		<-d.done
		d.cl.Close()
	})
}
