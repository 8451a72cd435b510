package gateway

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Moving streams. Publish and subscribe streams live as long as their
// clients: without help, the streams of a fleet stay on the pods that
// accepted them, and pods an autoscaler adds take only new ones. gRPC's
// MaxConnectionAge (ServerOptions) sends a connection's client a GOAWAY
// when the connection is old: the client opens new streams on a new
// connection, which its load balancer may send to another pod, but the
// streams already open would stay until the grace ends and the
// connection is cut under them (batches in flight resent, subscribe
// acks not committed, both delivered twice).
//
// So the gateway ends each stream of that connection in good order as
// soon as the GOAWAY goes out, the way a drain does: a publish stream
// stops reading, answers every batch it read, and ends; a subscribe
// stream stops delivering, waits a moment for the acks of what it
// delivered, commits them, and ends. Both end with Unavailable and an
// ErrorInfo of reason STREAM_MOVED, on which the client reconnects at
// once, without backoff, and resends only batches that were not
// answered: the gateway never read them, so none is stored twice. The
// same happens when the server stops gracefully.
//
// The GOAWAY is seen where the gate (recvgate.go) reads what gRPC writes
// to the connection: gRPC has no hook for it.

// Defaults of ServerOptions' connection ages.
const (
	// DefaultMaxConnectionAge is long enough that the reconnects (and,
	// for subscribe streams, the group rebalances they may cause) are
	// rare, short enough that a pod added at peak gets its share within
	// the half hour.
	DefaultMaxConnectionAge = 30 * time.Minute
	// DefaultMaxConnectionAgeGrace covers a stream's end in good order:
	// batches in flight wait for Kafka (--produce-timeout, 10s), acks
	// for a couple of seconds.
	DefaultMaxConnectionAgeGrace = 30 * time.Second
)

// gatedConnOf returns the gate's connection that the stream whose
// context is ctx runs on; nil for a connection the gate does not see.
func gatedConnOf(ctx context.Context) *gatedConn {
	c, _ := ctx.Value(gatedConnKey{}).(*gatedConn)
	return c
}

// A publish stream's handler blocks in Recv while its client sends
// nothing, and there is no second goroutine to watch for the drain or
// the GOAWAY (publish.go): the gateway ends its publish streams itself,
// through the sets below, when gRPC sends the connection's GOAWAY (the
// gate sees it) or the gateway drains.

// addPublisher makes p one of c's publish streams, ended in good order
// when gRPC tells c's client to go away (now, if it has).
func (c *gatedConn) addPublisher(p *publisher) {
	c.mu.Lock()
	p.connNext = c.pubs
	if c.pubs != nil {
		c.pubs.connPrev = p
	}
	c.pubs = p
	c.mu.Unlock()
	select {
	case <-c.away:
		p.end(databusv1.StreamMoved(movedMessage))
	default:
	}
}

func (c *gatedConn) removePublisher(p *publisher) {
	c.mu.Lock()
	if p.connPrev != nil {
		p.connPrev.connNext = p.connNext
	} else {
		c.pubs = p.connNext
	}
	if p.connNext != nil {
		p.connNext.connPrev = p.connPrev
	}
	p.connPrev, p.connNext = nil, nil
	c.mu.Unlock()
}

// movePublishers ends c's publish streams as moved: gRPC has told c's
// client to go away. Each ends on a goroutine of its own: one whose
// client does not read holds its send, and must not hold up the rest.
func (c *gatedConn) movePublishers() {
	c.mu.Lock()
	var pubs []*publisher
	for p := c.pubs; p != nil; p = p.connNext {
		pubs = append(pubs, p)
	}
	c.mu.Unlock()
	for _, p := range pubs {
		go p.end(databusv1.StreamMoved(movedMessage))
	}
}

// addPublisher makes p one of g's publish streams, ended in good order
// when g drains (now, if it does).
func (g *Gateway) addPublisher(p *publisher) {
	g.pubsMu.Lock()
	g.pubs[p] = struct{}{}
	g.pubsMu.Unlock()
	select {
	case <-g.draining:
		p.end(p.drainError())
	default:
	}
}

func (g *Gateway) removePublisher(p *publisher) {
	g.pubsMu.Lock()
	delete(g.pubs, p)
	g.pubsMu.Unlock()
}

// endPublishers ends g's publish streams, each on a goroutine of its own
// (as movePublishers): g drains.
func (g *Gateway) endPublishers() {
	g.pubsMu.Lock()
	pubs := make([]*publisher, 0, len(g.pubs))
	for p := range g.pubs {
		pubs = append(pubs, p)
	}
	g.pubsMu.Unlock()
	for _, p := range pubs {
		go p.end(p.drainError())
	}
}

// drainError is the status a drain ends p with: moved when gRPC has told
// its client to go away, as a gateway that stops does first (Stop), so
// that the client reconnects at once, wherever the drain or the GOAWAY
// reaches the stream first.
func (p *publisher) drainError() error {
	if p.conn != nil {
		select {
		case <-p.conn.away:
			return databusv1.StreamMoved(movedMessage)
		default:
		}
	}
	return streamError(codes.Unavailable, "%v", ErrDraining)
}

// connGoingAway returns a channel closed once gRPC has told the client of
// the stream whose context is ctx to go away; nil (never ready) for a
// connection the gate does not see.
func connGoingAway(ctx context.Context) <-chan struct{} {
	if c, ok := ctx.Value(gatedConnKey{}).(*gatedConn); ok {
		return c.away
	}
	return nil
}

// movedMessage is the message of the status that ends a moved stream.
const movedMessage = "databus: this connection reached its maximum age (the gateway's --max-connection-age) or the gateway is stopping: the stream ended in good order, every batch read was answered and every ack committed; reconnect (the databus client does, at once) and resend what was not answered"

// awaitGoAway waits, at most d, until gRPC has told every client
// connection of g's servers to go away (GracefulStop does, from another
// goroutine): streams a drain ends after that reopen on new connections,
// not on these.
func (g *Gateway) awaitGoAway(ctx context.Context, d time.Duration) {
	var conns []*gatedConn
	g.gatesMu.Lock()
	for _, gate := range g.gates {
		gate.mu.Lock()
		for _, c := range gate.conns {
			conns = append(conns, c)
		}
		gate.mu.Unlock()
	}
	g.gatesMu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for _, c := range conns {
		select {
		case <-c.away:
		case <-c.done: // closed meanwhile
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
