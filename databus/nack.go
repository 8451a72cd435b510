package databus

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// The default delays before a message whose handler failed comes again:
// 1s after its first delivery, doubling to a minute.
const (
	defaultRetryFirst = time.Second
	defaultRetryMax   = time.Minute
)

// maxReasonBytes is as much of a nack's reason as the gateway keeps (for
// the dead-letter header): more is not sent.
const maxReasonBytes = 1024

// DeadLetter makes the gateway write a message to the dead-letter topic
// (DeadLetterTopic, "<topic>.dlq" by default) instead of redelivering it
// when it is nacked at its maxDeliveries-th delivery; only once Kafka
// stored it there does its offset count as acked. maxDeliveries is 1 or
// more, and at most the gateway's --max-deliveries (more is
// InvalidArgument). The dead-letter topic must exist when the stream
// opens. Without DeadLetter a nacked message comes again for as long as
// it is nacked.
func DeadLetter(maxDeliveries int) SubscribeOption {
	return func(c *subCfg) { c.maxDeliveries = maxDeliveries }
}

// DeadLetterTopic names the dead-letter topic of DeadLetter.
func DeadLetterTopic(name string) SubscribeOption {
	return func(c *subCfg) { c.deadLetterTopic, c.deadLetterTopicSet = name, true }
}

// RetryDelay sets how long a message whose handler returned an error
// (Subscribe, SubscribeEach) waits before it comes again: first after its
// first delivery, doubling at each delivery after, at most max, drawn
// between half of that and all of it so that the retries of many members
// spread out (default 1s to 1m). The gateway cuts a delay to its
// --max-nack-delay.
func RetryDelay(first, max time.Duration) SubscribeOption {
	return func(c *subCfg) { c.retryFirst, c.retryMax = first, max }
}

// validateRetries checks the options of this file.
func (c *subCfg) validateRetries() error {
	switch {
	case c.maxDeliveries < 0 || c.maxDeliveries == 0 && c.deadLetterTopicSet:
		return fmt.Errorf("databus: DeadLetter(%d): give the number of deliveries after which a nacked message is dead-lettered, 1 or more", c.maxDeliveries)
	case c.deadLetterTopicSet && c.deadLetterTopic == "":
		return fmt.Errorf("databus: DeadLetterTopic(\"\"): name a topic, or leave the option out for %q", "<topic>"+databusv1.DeadLetterSuffix)
	case c.retryFirst <= 0 || c.retryMax < c.retryFirst:
		return fmt.Errorf("databus: RetryDelay(%s, %s): give 0 < first <= max", c.retryFirst, c.retryMax)
	}
	return nil
}

// deadLetterMetadata is the stream metadata of DeadLetter and
// DeadLetterTopic.
func (c *subCfg) deadLetterMetadata() []string {
	if c.maxDeliveries == 0 {
		return nil
	}
	md := []string{databusv1.MDMaxDeliveries, strconv.Itoa(c.maxDeliveries)}
	if c.deadLetterTopic != "" {
		md = append(md, databusv1.MDDeadLetterTopic, c.deadLetterTopic)
	}
	return md
}

// retryDelay is how long a message delivered deliveries times waits after
// its handler failed.
func (c *subCfg) retryDelay(deliveries int) time.Duration {
	return jitteredBackoff(c.retryFirst, c.retryMax, max(deliveries, 1)-1)
}

// Nack tells the gateway d failed for now: it comes again after delay
// (rounded to milliseconds; 0: at once; the gateway cuts it to its
// --max-nack-delay), to the member that has its partition then, with
// DeliveryCount one higher, while the partition's later messages keep
// coming; the gateway commits nothing past it meanwhile. With DeadLetter,
// a message nacked at its last delivery goes to the dead-letter topic
// instead, with reason in its databus-nack-reason header (its first 1024
// bytes: the gateway keeps no more). A message is settled once per
// delivery: a second Nack or Ack of it is ignored.
func (s *Subscription) Nack(d Delivery, delay time.Duration, reason string) error {
	return s.settle(nil, []*databusv1.Nack{nackOf(d, delay, reason)})
}

// settle sends acks and nacks in one request.
func (s *Subscription) settle(acked []Delivery, nacks []*databusv1.Nack) error {
	if len(acked)+len(nacks) == 0 {
		return nil
	}
	req := &databusv1.SubscribeRequest{Nacks: nacks}
	if len(acked) > 0 {
		req.Acks = acks(acked)
	}
	return s.send(req)
}

// nackAll nacks the batch ds, whose handler failed with err, with one
// delay, that of its most delivered message: the batch failed as one and
// comes back together.
func nackAll(ds []Delivery, sc *subCfg, err error) []*databusv1.Nack {
	deliveries := 0
	for _, d := range ds {
		deliveries = max(deliveries, d.DeliveryCount)
	}
	delay, reason := sc.retryDelay(deliveries), err.Error()
	out := make([]*databusv1.Nack, len(ds))
	for i, d := range ds {
		out[i] = nackOf(d, delay, reason)
	}
	return out
}

func nackOf(d Delivery, delay time.Duration, reason string) *databusv1.Nack {
	ms := (max(delay, 0) + time.Millisecond/2) / time.Millisecond
	return &databusv1.Nack{Partition: d.Partition, Offset: d.Offset, DelayMs: uint32(min(ms, math.MaxUint32)), Reason: truncateUTF8(reason, maxReasonBytes)}
}

// truncateUTF8 cuts s to at most n bytes, not inside a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// SubscribeEach is Subscribe with a handler per message: it calls handle
// for each message of a batch, in the batch's order (a partition's
// offset order), one at a time, and then acks the messages it handled
// without error and nacks the others, each after RetryDelay's delay for
// its DeliveryCount, with the error's text as the reason. A nacked
// message comes again after later messages of its partition: a consumer
// that needs a key's messages in order must not fail one and handle the
// next. A handler's error never ends or reopens the stream. Concurrency
// is the caller's: run several SubscribeEach (each on its own Client
// when busy) in the same group, and the gateway shares the partitions
// among them. It returns as Subscribe does.
func (c *Client) SubscribeEach(ctx context.Context, topic, group string, handle func(context.Context, Delivery) error, opts ...SubscribeOption) error {
	return c.consume(ctx, topic, group, opts, func(ctx context.Context, sub *Subscription, sc *subCfg, ds []Delivery) error {
		var done []Delivery
		var failed []*databusv1.Nack
		for _, d := range ds {
			if ctx.Err() != nil {
				break // the rest are not settled: they come again
			}
			if err := handle(ctx, d); err != nil {
				failed = append(failed, nackOf(d, sc.retryDelay(d.DeliveryCount), err.Error()))
				continue
			}
			done = append(done, d)
		}
		return sub.settle(done, failed)
	})
}
