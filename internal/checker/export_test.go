package checker

import (
	"context"
	"time"
)

// DeadLetterReport is what ReadDeadLetters found, for the external tests.
type DeadLetterReport struct {
	DeadLettered, Duplicates, Others, Malformed int64
	Counts                                      map[uint32]int64
}

// ReadDeadLetters reads topic as a run of id run, streams streams and
// groups (by name) reads its dead-letter topic, and reports what group
// 0 dead-lettered.
func ReadDeadLetters(ctx context.Context, brokers []string, topic string, run uint64, streams int, groups []string) (DeadLetterReport, error) {
	cfg := &Config{Brokers: brokers, DeadLetterTopic: topic}
	led := newLedger(streams, len(groups))
	d, err := startDeadLetters(ctx, cfg, run, led, groups)
	if err != nil {
		return DeadLetterReport{}, err
	}
	if err := d.stop(ctx); err != nil {
		return DeadLetterReport{}, err
	}
	r := led.check(0, 0)
	return DeadLetterReport{DeadLettered: r.deadLettered, Duplicates: r.deadDuplicates, Others: d.others.Load(), Malformed: d.malformed.Load(), Counts: r.deadCounts}, nil
}

// Meta is a checker message's metaHeader and its value.
func Meta(run uint64, stream int, seq int64) (key string, value []byte) {
	return metaHeader, encodeMeta(run, ID{Stream: stream, Seq: seq}, time.Now())
}
