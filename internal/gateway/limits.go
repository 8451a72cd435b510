package gateway

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
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
	limitRecvBytes    = "recv_bytes" // gRPC's receive limit, from --max-stream-bytes
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
// waits until the total is back under the limit. A message about to be
// received reserves its bytes before they arrive (tryAcquire), and waits
// for a release when they do not fit.
type budget struct {
	limit int64
	used  atomic.Int64

	// A waiter sets waiting and then checks used; a releaser lowers used
	// and then checks waiting: with Go's sequentially consistent atomics
	// one of them sees the other, so no wake-up is lost.
	waiting atomic.Bool
	mu      sync.Mutex
	freed   chan struct{} // closed at a release, when someone waits
}

func (b *budget) add(n int64) { b.used.Add(n) }

// tryAcquire adds n if it fits under the limit, or if nothing is in
// flight (one message larger than the limit still goes, alone).
func (b *budget) tryAcquire(n int64) bool {
	for {
		u := b.used.Load()
		if u != 0 && u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// changed returns a channel closed at the next release.
func (b *budget) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	b.waiting.Store(true)
	return b.freed
}

func (b *budget) release(n int64) {
	b.used.Add(-n)
	if b.waiting.Load() {
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
	ch := b.changed()
	if b.used.Load() < b.limit {
		return nil
	}
	return ch
}

// healthWatch is the health service's streaming method: each Watch holds
// a stream for as long as its client likes.
const healthWatch = "/grpc.health.v1.Health/Watch"

// boundHealthWatch counts health Watch streams against MaxStreams, as the
// databus streams are: without it a client could hold any number.
func (g *Gateway) boundHealthWatch(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != healthWatch {
		return handler(srv, ss)
	}
	if err := g.openStream(); err != nil {
		return err
	}
	defer g.closeStream()
	return handler(srv, ss)
}

// connLimit is a listener that serves at most max connections at once: one
// more is closed as soon as it is accepted, before any handshake, and
// counted, so that a client cannot hold the gateway's descriptors and
// handshake goroutines without bound.
type connLimit struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused prometheus.Counter
	log     *slog.Logger
	logged  atomic.Int64 // unix second of the last refusal logged
}

func limitConns(ln net.Listener, max int, reg prometheus.Registerer, log *slog.Logger) net.Listener {
	l := &connLimit{Listener: ln, max: int64(max), log: log,
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_connections_refused_total",
			Help: "Client connections closed at once because the gateway had --max-connections open."})}
	registerOrReuse(reg, &l.refused)
	return l
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		c.Close()
		l.refused.Inc()
		if now := time.Now().Unix(); l.logged.Swap(now) != now {
			l.log.Warn("databus: refused a connection: the gateway has its limit open (--max-connections)", "max", l.max, "remote", c.RemoteAddr().String())
		}
	}
}

type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
