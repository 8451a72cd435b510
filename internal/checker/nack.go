package checker

import (
	"fmt"
	"math"
	"time"
)

// Members that nack (Config.NackFraction, Config.PoisonKeys): which
// messages they nack (the nack itself is the client's Subscription.Nack).
//
// The checker's messages have no Kafka key: a message's identity is its
// ID (stream and sequence number, in its metaHeader), so the "key" the
// choices hash is the ID. Both choices are deterministic, the same in
// every group and every run of the same shape.

// poisonStride spaces the poison messages: the message whose index
// seq*Streams+stream is a multiple of it is poison, for the first
// PoisonKeys such indexes. A prime, so the poison messages fall on every
// stream (and so on every partition), spread over the first
// poisonStride*PoisonKeys messages published, while the rest flow.
const poisonStride = 101

// Nack reasons the checker sends, which the dead letters carry
// (databusv1.HeaderNackReason).
const (
	reasonPoison = "checker: poison message"
	reasonNacked = "checker: nacked fraction"
)

// maxNackDelay bounds Config.NackDelay: a Nack's delay_ms is 32 bits.
const maxNackDelay = time.Duration(math.MaxUint32) * time.Millisecond

// nacks reports whether the members nack anything.
func (c *Config) nacks() bool { return c.NackFraction > 0 || c.PoisonKeys > 0 }

// deadLetters reports whether messages may be dead-lettered, and the
// run verifies the dead-letter topic.
func (c *Config) deadLetters() bool { return c.MaxDeliveries > 0 }

// poisonIDs are the poison messages of a run of streams streams, by
// stream: the first k indexes seq*streams+stream that are multiples of
// poisonStride.
func poisonIDs(streams, k int) []ID {
	out := make([]ID, k)
	for j := range out {
		n := int64(j) * poisonStride
		out[j] = ID{Stream: int(n % int64(streams)), Seq: n / int64(streams)}
	}
	return out
}

// isPoison reports whether id is one of k poison messages of a run of
// streams streams (poisonIDs).
func isPoison(id ID, streams, k int) bool {
	n := id.Seq*int64(streams) + int64(id.Stream)
	return k > 0 && n%poisonStride == 0 && n/poisonStride < int64(k)
}

// nackedOnce reports whether a member nacks id on its first delivery
// (deliveryCount 1, or 0 from a gateway that does not count): a hash of
// the ID below fraction. A redelivery is acked, so each such message is
// nacked once per gateway that delivers it first (a count starts again
// at 1 on another gateway, or after a restart).
func nackedOnce(id ID, deliveryCount uint32, fraction float64) bool {
	if fraction <= 0 || deliveryCount > 1 {
		return false
	}
	h := mix64(uint64(id.Stream)<<40 ^ uint64(id.Seq))
	return float64(h>>11)/(1<<53) < fraction
}

// mix64 is splitmix64's finalizer: every bit of x reaches every bit of
// the result, so the sequence numbers' low bits do not pick the nacked.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// validateNacks checks the nacking and dead-letter settings.
func (c *Config) validateNacks() error {
	switch {
	case c.NackFraction < 0 || c.NackFraction > 1 || math.IsNaN(c.NackFraction):
		return fmt.Errorf("%w: --nack-fraction %g: give 0 (none) to 1 (every message nacked once)", ErrConfig, c.NackFraction)
	case c.NackDelay < 0 || c.NackDelay > maxNackDelay:
		return fmt.Errorf("%w: --nack-delay %v: give 0 (redeliver at once) up to the gateway's --max-nack-delay", ErrConfig, c.NackDelay)
	case c.PoisonKeys < 0 || c.PoisonKeys > maxPoisonKeys:
		return fmt.Errorf("%w: --poison-keys %d: give 0 to %d", ErrConfig, c.PoisonKeys, maxPoisonKeys)
	case c.MaxDeliveries < 0:
		return fmt.Errorf("%w: --max-deliveries %d: give 0 (no dead letters) or more", ErrConfig, c.MaxDeliveries)
	case (c.nacks() || c.deadLetters()) && (c.Groups == 0 || c.consumesDirect()):
		return fmt.Errorf("%w: --nack-fraction, --poison-keys and --max-deliveries are the gateway's consumers': give --groups, and not --direct with --consume only", ErrConfig)
	case c.PoisonKeys > 0 && !c.deadLetters():
		return fmt.Errorf("%w: --poison-keys: poison messages are nacked at every delivery, so without dead letters they come back for ever: give --max-deliveries N too", ErrConfig)
	case c.NackFraction > 0 && c.MaxDeliveries == 1:
		return fmt.Errorf("%w: --max-deliveries 1 dead-letters every nacked message, and --nack-fraction's are to be acked when they come again: give --max-deliveries 2 or more", ErrConfig)
	case c.DeadLetterTopic != "" && !c.deadLetters():
		return fmt.Errorf("%w: --dead-letter-topic names where dead letters go, and only --max-deliveries makes any: give --max-deliveries N too", ErrConfig)
	case c.deadLetters() && len(c.Brokers) == 0:
		return fmt.Errorf("%w: --max-deliveries: the checker reads the dead-letter topic straight from Kafka: give --brokers", ErrConfig)
	case c.deadLetters() && (len(c.Topics) > 1 || c.Consume == Only):
		return fmt.Errorf("%w: --max-deliveries: dead letters are verified on one topic the run publishes: give --topic, and --consume concurrent or after", ErrConfig)
	case c.PoisonKeys > 0 && c.Consume == Only:
		return fmt.Errorf("%w: --poison-keys picks messages the run publishes: not with --consume only", ErrConfig)
	}
	return nil
}

// maxPoisonKeys bounds Config.PoisonKeys: each is a message dead-lettered
// by each group, and read back from Kafka.
const maxPoisonKeys = 100000
