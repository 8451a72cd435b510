package gateway

import (
	"context"
	"time"
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
