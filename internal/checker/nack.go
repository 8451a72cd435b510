package checker

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
)

// Members that nack (Config.NackFraction, Config.PoisonKeys): which
// messages they nack, and how the nack reaches the gateway.
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

// The gateway's side of a nack, reached under the client's Subscription.
// The client (package databus) has no Nack and no delivery counts yet:
// the checker's members reach the subscription's gRPC stream through a
// stream interceptor on their connection, which keeps the stream and the
// last response it read, and send their nacks on it. Once the client
// has Subscription.Nack and Delivery.DeliveryCount, this goes.

// rawKey marks, in the context of a subscription's opening, the
// rawSubscription its stream is to be kept in.
type rawKey struct{}

// rawSubscription is a subscription's gRPC stream and the last response
// it read. A member's goroutine uses it, after its Subscription's Recv
// and beside its Ack, from that goroutine alone.
type rawSubscription struct {
	stream grpc.ClientStream
	last   *databusv1.SubscribeResponse
}

// keptStream is a subscribe stream whose responses rawSubscription sees.
type keptStream struct {
	grpc.ClientStream
	raw *rawSubscription
}

func (s *keptStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if r, ok := m.(*databusv1.SubscribeResponse); ok && err == nil {
		s.raw.last = r
	}
	return err
}

// keepStreams is the interceptor of a nacking member's connection.
func keepStreams(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	raw, ok := ctx.Value(rawKey{}).(*rawSubscription)
	if err != nil || !ok {
		return cs, err
	}
	raw.stream = cs
	return &keptStream{ClientStream: cs, raw: raw}, nil
}

// nackOptions are a nacking member's connection's options.
func nackOptions() []databus.Option {
	return []databus.Option{databus.WithDialOptions(grpc.WithChainStreamInterceptor(keepStreams))}
}

// subscribeContext is the context a nacking member opens a subscription
// with: raw keeps its stream, and the dead-letter settings travel in its
// metadata.
func (c *Config) subscribeContext(ctx context.Context, raw *rawSubscription) context.Context {
	ctx = context.WithValue(ctx, rawKey{}, raw)
	if c.deadLetters() {
		ctx = metadata.AppendToOutgoingContext(ctx, databusv1.MDMaxDeliveries, strconv.Itoa(c.MaxDeliveries),
			databusv1.MDDeadLetterTopic, c.DeadLetterTopic)
	}
	return ctx
}

// deliveryCount is the delivery count of message i of the batch raw's
// stream read last; 0 when unknown.
func (r *rawSubscription) deliveryCount(i int) uint32 {
	if r == nil || r.last == nil || i >= len(r.last.Messages) {
		return 0
	}
	return r.last.Messages[i].DeliveryCount
}

// nack sends nacks on raw's stream.
func (r *rawSubscription) nack(nacks []*databusv1.Nack) error {
	if len(nacks) == 0 {
		return nil
	}
	if r.stream == nil {
		return fmt.Errorf("checker: no subscribe stream to nack on")
	}
	return r.stream.SendMsg(&databusv1.SubscribeRequest{Nacks: nacks})
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
