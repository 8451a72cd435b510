package gateway

import (
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
)

// The gateway's limits (Config.MaxStreams, MaxKafkaClients, MaxStreamBytes,
// MaxGatewayBytes). What can never fit, or needs a resource the gateway
// has no more of, is refused with ResourceExhausted and a message naming
// the flag; bytes wait: a stream over a bytes limit is not read (publish)
// or not fetched for (subscribe) until bytes are answered or sent.

// The label values of databus_refusals_total.
const (
	limitStreams      = "streams"
	limitKafkaClients = "kafka_clients"
	limitStreamBytes  = "stream_bytes"
)

// The label values of databus_kafka_clients.
const (
	clientShared   = "shared"   // the aggregated producer, also for metadata
	clientProducer = "producer" // a publish stream's own
	clientMember   = "member"   // the group member serving a group's subscribe streams
)

// openStream takes a place for a stream, or returns the refusal.
func (g *Gateway) openStream() error {
	if n := g.open.Add(1); n > int64(g.cfg.MaxStreams) {
		g.open.Add(-1)
		g.m.refusals.WithLabelValues(limitStreams).Inc()
		return streamError(codes.ResourceExhausted, "this gateway serves its limit of %d streams (--max-streams): retry with backoff, connect to another instance, or raise the limit", g.cfg.MaxStreams)
	}
	return nil
}

func (g *Gateway) closeStream() { g.open.Add(-1) }

// acquireClient takes a place for a Kafka client of kind, or returns the
// refusal. The shared producer's place is taken when the gateway starts.
func (g *Gateway) acquireClient(kind string) error {
	if n := g.clients.Add(1); n > int64(g.cfg.MaxKafkaClients) {
		g.clients.Add(-1)
		g.m.refusals.WithLabelValues(limitKafkaClients).Inc()
		hint := ""
		if kind == clientProducer {
			hint = fmt.Sprintf("publish with %s: on (one shared producer), ", MDAggregation)
		}
		return streamError(codes.ResourceExhausted, "this gateway has its limit of %d Kafka clients (--max-kafka-clients): %sretry with backoff on another instance, or raise the limit", g.cfg.MaxKafkaClients, hint)
	}
	g.m.kafkaClients.WithLabelValues(kind).Inc()
	return nil
}

func (g *Gateway) releaseClient(kind string) {
	g.clients.Add(-1)
	g.m.kafkaClients.WithLabelValues(kind).Dec()
}

// budget counts bytes in flight against a limit. Adding never blocks (what
// is added is in memory already); a stream that would add more first
// waits until the total is back under the limit.
type budget struct {
	limit int64
	used  atomic.Int64

	// A waiter sets waiting and then checks used; a releaser lowers used
	// and then checks waiting: with Go's sequentially consistent atomics
	// one of them sees the other, so no wake-up is lost.
	waiting atomic.Bool
	mu      sync.Mutex
	freed   chan struct{} // closed when bytes were released under the limit
}

func (b *budget) add(n int64) { b.used.Add(n) }

func (b *budget) release(n int64) {
	if b.used.Add(-n) < b.limit && b.waiting.Load() {
		b.mu.Lock()
		if b.waiting.Load() {
			b.waiting.Store(false)
			close(b.freed)
			b.freed = nil
		}
		b.mu.Unlock()
	}
}

// wait returns nil when the budget is under its limit, else a channel
// closed once it may be (check again).
func (b *budget) wait() <-chan struct{} {
	if b.used.Load() < b.limit {
		return nil
	}
	b.mu.Lock()
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	ch := b.freed
	b.waiting.Store(true)
	b.mu.Unlock()
	if b.used.Load() < b.limit {
		return nil
	}
	return ch
}
