package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeOnly is a Consume Only run: no publishers; fresh groups drain
// the records topic holds, each of which every group must receive.
func consumeOnly(ctx context.Context, cfg *Config, gw *gatewayProc, progress Progress, fail context.CancelCauseFunc) (*Result, error) {
	starts, ends, err := topicOffsets(ctx, cfg.Brokers, cfg.kafkaOpts, cfg.Topics[0])
	if err != nil {
		return nil, err
	}
	led := newLedger(len(ends), cfg.Groups)
	for p := range ends {
		led.ackRange(p, starts[p], ends[p])
	}
	if led.ackedCount() == 0 {
		return nil, fmt.Errorf("checker: topic %q at %v holds no records: fill it first (a run without --consume only, e.g. --groups 0), then drain it", cfg.Topics[0], cfg.Brokers)
	}
	errs := &errorCounts{}
	res := newResult(cfg)
	cons := newConsumers(cfg, rand.Uint64(), led, errs)
	cons.ends = ends
	progress("%d group(s) x %d member(s) draining %d records of %s", cfg.Groups, cfg.Members, led.ackedCount(), cfg.Topics[0])
	if cfg.OnWindow != nil {
		cfg.OnWindow(true)
	}
	cpuStart := ProcessCPU()
	start := time.Now()
	if err := cons.start(ctx); err != nil {
		cons.stop()
		return nil, err
	}
	drained := drainGroups(ctx, cfg, gw, cons, led, res, start, progress, fail)
	if cfg.OnWindow != nil {
		cfg.OnWindow(false)
	}
	if cfg.consumesDirect() {
		res.ConsumeCPUS = ProcessCPU() - cpuStart
	}
	cons.stop()
	res.deliveryFigures(led, cons, drained.Sub(start), drained.Sub(start))
	res.Errors = errs.snapshot()
	if ctx.Err() != nil {
		return res, context.Cause(ctx)
	}
	return res, nil
}

// topicOffsets reads topic's start and end offsets, by partition.
func topicOffsets(ctx context.Context, brokers []string, sec []kgo.Opt, topic string) (starts, ends []int64, err error) {
	cl, err := newKafkaClient(brokers, sec)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	list := func(f func(context.Context, ...string) (kadm.ListedOffsets, error)) ([]int64, error) {
		lo, err := f(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("checker: offsets of topic %q at %v (does it exist? fill it first): %w", topic, brokers, err)
		}
		var out []int64
		lo.Each(func(o kadm.ListedOffset) {
			for int(o.Partition) >= len(out) {
				out = append(out, 0)
			}
			out[o.Partition] = o.Offset
		})
		if len(out) == 0 {
			return nil, fmt.Errorf("checker: topic %q at %v has no partitions: fill it first (a run without --consume only)", topic, brokers)
		}
		return out, nil
	}
	if starts, err = list(adm.ListStartOffsets); err != nil {
		return nil, nil, err
	}
	if ends, err = list(adm.ListEndOffsets); err != nil {
		return nil, nil, err
	}
	if len(starts) != len(ends) {
		return nil, nil, fmt.Errorf("checker: topic %q changed its partitions while the checker read its offsets: run again", topic)
	}
	return starts, ends, nil
}
