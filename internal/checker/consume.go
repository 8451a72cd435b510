package checker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/highload-lab/hlab/databus"
)

// consumers are the run's consumer groups, G groups of M members, each
// member a subscription on a connection of its own.
type consumers struct {
	cfg  *Config
	run  uint64
	led  *ledger
	e2e  *hist
	errs *errorCounts
	// win is the measured window, set once publishing starts (consumers
	// may start before): end-to-end latency counts for messages sent in it.
	win atomic.Pointer[window]

	clients []*databus.Client
	kafka   []*kgo.Client  // with Direct, the members straight to Kafka
	conns   []*connTracker // each client's TCP connections (DropMember)
	dropReq chan chan int  // a fault asking a member holding a batch to drop
	wg      sync.WaitGroup
	cancel  context.CancelFunc

	received atomic.Int64 // this run's messages, duplicates included
	others   atomic.Int64 // messages of other runs (older ones in the topic)
	cycles   atomic.Int64 // batches received and acked
	// nacked counts the nacks the members sent; redelivered the messages
	// delivered with a delivery count above 1 (Config.NackFraction,
	// PoisonKeys).
	nacked, redelivered atomic.Int64
	assigned            []atomic.Bool // by group and topic: a member of it has partitions
	lastNotice          atomic.Int64  // Unix ns of the last assignment change
	// ends, with Consume Only, are the end offsets by partition: the
	// ledger's records are (partition, offset) below them, not the
	// messages' own headers.
	ends []int64
}

// GroupName is the consumer group of group g: stable across runs, so a
// rerun on the same topic resumes after what earlier runs committed.
func GroupName(topic string, g int) string { return fmt.Sprintf("%s-checker-%d", topic, g) }

// group is the name of group g: GroupName, or with Consume Only a name
// of this run's own, so that every run drains the topic from its start.
func (c *consumers) group(g int) string { return groupOf(c.cfg, c.run, g) }

// groupOf is the name of group g of run: see consumers.group.
func groupOf(cfg *Config, run uint64, g int) string {
	if cfg.Consume == Only {
		return fmt.Sprintf("%s-%016x", GroupName(cfg.Topics[0], g), run)
	}
	return GroupName(cfg.Topics[0], g)
}

// arrived counts the messages the groups have received, of this run and
// older ones, duplicates included: it grows while they still read.
func (c *consumers) arrived() int64 { return c.received.Load() + c.others.Load() }

func newConsumers(cfg *Config, run uint64, led *ledger, errs *errorCounts) *consumers {
	return &consumers{cfg: cfg, run: run, led: led, e2e: newHist(), errs: errs, assigned: make([]atomic.Bool, cfg.Groups*len(cfg.Topics)), dropReq: make(chan chan int)}
}

// start dials a connection per member and starts every member; with
// Direct and Consume Only, a Kafka client per member (startDirect).
func (c *consumers) start(ctx context.Context) error {
	if c.cfg.consumesDirect() {
		return c.startDirect(ctx)
	}
	ctx, c.cancel = context.WithCancel(ctx)
	for range c.cfg.Groups * c.cfg.Members {
		ct := &connTracker{}
		opts := append(c.cfg.Credentials.Options(), databus.WithBackoff(20*time.Millisecond, time.Second),
			databus.WithDialOptions(grpc.WithContextDialer(ct.dial)))
		cl, err := databus.Dial(c.cfg.Target, opts...)
		if err != nil {
			return err
		}
		c.clients = append(c.clients, cl)
		c.conns = append(c.conns, ct)
	}
	c.lastNotice.Store(time.Now().UnixNano())
	for g := range c.cfg.Groups {
		for m := range c.cfg.Members {
			i := g*c.cfg.Members + m
			for t := range c.cfg.Topics {
				c.wg.Go(func() { c.member(ctx, i, g, t) })
			}
		}
	}
	return nil
}

// awaitAssigned waits until every group has partitions and no assignment
// changed for a moment (members join one by one, each a rebalance), so
// publishing starts on a settled group. It gives up after limit: the
// members still get every message (a new group reads from the start),
// only the first latencies include the joining.
func (c *consumers) awaitAssigned(ctx context.Context, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		all := true
		for g := range c.assigned {
			all = all && c.assigned[g].Load()
		}
		if all && time.Since(time.Unix(0, c.lastNotice.Load())) > 500*time.Millisecond {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// member is member i of group g on topic t: one subscription, opened
// again when it breaks. A member of several topics has one on each, on
// its one connection.
func (c *consumers) member(ctx context.Context, i, g, t int) {
	cl := c.clients[i]
	var opts []databus.SubscribeOption
	if c.cfg.SubBatch > 0 {
		opts = append(opts, databus.BatchSize(c.cfg.SubBatch))
	}
	if c.cfg.MaxUnacked > 0 {
		opts = append(opts, databus.MaxUnacked(c.cfg.MaxUnacked))
	}
	if c.cfg.deadLetters() {
		opts = append(opts, databus.DeadLetter(c.cfg.MaxDeliveries), databus.DeadLetterTopic(c.cfg.DeadLetterTopic))
	}
	group := c.group(g)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		sub, err := cl.OpenSubscription(ctx, c.cfg.Topics[t], group, opts...)
		if err == nil {
			err = c.consume(ctx, sub, i, g, g*len(c.cfg.Topics)+t)
			sub.Close()
			if err == nil || errors.Is(err, errDropped) || databus.Moved(err) {
				attempt, err = 0, nil // a move is no failure (--max-connection-age)
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.errs.add(status.Code(err).String(), 1)
		}
		select { // the gateway restarted or drains: come back soon
		case <-ctx.Done():
			return
		case <-time.After(min(20*time.Millisecond<<min(attempt, 6), time.Second)):
		}
	}
}

// consume reads one subscription of member i of group g until it breaks:
// nil when it ended cleanly, the error otherwise. assigned is the group's
// and topic's place in c.assigned.
func (c *consumers) consume(ctx context.Context, sub *databus.Subscription, i, g, assigned int) error {
	t := newTally()
	for {
		b, err := sub.Recv()
		if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled && ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if len(b.Assigned)+len(b.Revoked) > 0 {
			c.lastNotice.Store(time.Now().UnixNano())
			if len(b.Assigned) > 0 {
				c.assigned[assigned].Store(true)
			}
		}
		if len(b.Messages) == 0 {
			continue
		}
		c.begin(t)
		acks, nacks := b.Messages, []nack(nil)
		if c.cfg.nacks() {
			acks, nacks = c.sortOut(b.Messages)
		}
		for _, d := range acks {
			c.tally(t, d.Partition, d.Offset, metaOf(d))
		}
		select {
		case reply := <-c.dropReq: // a fault: die holding the batch
			c.conns[i].reset()
			reply <- len(b.Messages)
			return errDropped
		default:
		}
		if !c.process(ctx) {
			return nil // not acked: delivered again to the group
		}
		for _, n := range nacks {
			if err := sub.Nack(n.d, c.cfg.NackDelay, n.reason); err != nil {
				return err // not nacked: delivered again once the stream ends
			}
			c.nacked.Add(1)
		}
		if err := sub.Ack(acks...); err != nil {
			return err // not acked: delivered again, or lost if the gateway committed past it
		}
		c.acked(g, t)
	}
}

// A tally is one batch a member received, sorted for the ledger: this
// run's messages (their IDs, and the end-to-end latencies of those sent
// in the measured window) and how many were older runs'. Both kinds of
// member, through the gateway and straight from Kafka (directconsume.go),
// count a batch with it, so that they verify and count alike.
type tally struct {
	ids    []ID
	lats   []time.Duration
	others int64
	now    time.Time
	win    *window
}

func newTally() *tally {
	return &tally{ids: make([]ID, 0, 128), lats: make([]time.Duration, 0, 128)}
}

// begin empties t for a batch that arrived now.
func (c *consumers) begin(t *tally) {
	t.ids, t.lats, t.others = t.ids[:0], t.lats[:0], 0
	t.now, t.win = time.Now(), c.win.Load()
}

// tally adds a message of the batch to t: the record at offset of
// partition, meta its metaHeader's value (nil when it has none).
func (c *consumers) tally(t *tally, partition int32, offset int64, meta []byte) {
	id, sent, ok := c.idOf(partition, offset, meta)
	if !ok {
		t.others++
		return
	}
	t.ids = append(t.ids, id)
	if t.win != nil && t.win.contains(sent) {
		t.lats = append(t.lats, t.now.Sub(sent))
	}
}

// process is the member's work on a batch before acking it
// (Config.ProcessDelay); false when the run ended first, and the batch
// must not be acked.
func (c *consumers) process(ctx context.Context) bool {
	if c.cfg.ProcessDelay <= 0 {
		return true
	}
	select {
	case <-time.After(c.cfg.ProcessDelay):
		return true
	case <-ctx.Done():
		return false
	}
}

// acked counts t's batch, which member of group g just acked. Received
// counts only once acked: a message that arrived and was never acked
// must come again, or the gateway committed past it and it is lost.
// Counted on arrival, it would hide that.
func (c *consumers) acked(g int, t *tally) {
	c.led.receive(g, t.ids)
	c.received.Add(int64(len(t.ids)))
	c.others.Add(t.others)
	if len(t.lats) > 0 {
		c.e2e.recordAll(t.lats)
	}
	c.cycles.Add(1)
}

// idOf names the record at offset of partition in the ledger, with its
// send time, from meta, its metaHeader's value; ok is false for a
// message this run does not check (an older run's, or with Consume Only
// one written after the run read the end offsets).
func (c *consumers) idOf(partition int32, offset int64, meta []byte) (id ID, sent time.Time, ok bool) {
	if c.ends != nil {
		p := int(partition)
		return ID{Stream: p, Seq: offset}, time.Time{}, p < len(c.ends) && offset < c.ends[p]
	}
	run, id, sent, ok := decodeMeta(meta)
	return id, sent, ok && run == c.run
}

// metaOf is d's metaHeader's value, nil when it has none.
func metaOf(d databus.Delivery) []byte {
	for _, h := range d.Headers {
		if h.Key == metaHeader {
			return h.Value
		}
	}
	return nil
}

// errDropped ends a subscription whose connection a fault reset.
var errDropped = errors.New("checker: connection reset by a fault")

// drop has the next member to receive a batch reset its connection
// instead of acking it (Config.DropMember): the member's process died
// with messages unacked. It returns how many messages the member held.
func (c *consumers) drop(ctx context.Context, timeout time.Duration) (int, error) {
	reply := make(chan int, 1)
	select {
	case c.dropReq <- reply:
		return <-reply, nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("no member received a batch within %v: none dropped", timeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// connTracker dials a client's TCP connections and keeps them, so that a
// fault can reset them under gRPC.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (t *connTracker) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.conns = append(t.conns, c)
	t.mu.Unlock()
	return c, nil
}

// reset closes every connection with an RST (linger 0): the peer sees
// the connection drop, as when a process is SIGKILLed, not a goodbye.
func (t *connTracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	t.conns = nil
}

// stop ends every member (the gateway, or with Direct the member itself,
// commits what was acked) and closes the connections.
func (c *consumers) stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	c.closeDirect()
	for _, cl := range c.clients {
		cl.Close()
	}
}

// A nack is a message to nack, and why.
type nack struct {
	d      databus.Delivery
	reason string
}

// sortOut splits a batch into the messages to ack and those to nack:
// poison messages at every delivery, the nacked fraction at their first
// (they are nacked with Config.NackDelay); messages of other runs are
// acked. It counts the batch's redeliveries.
func (c *consumers) sortOut(ms []databus.Delivery) (acks []databus.Delivery, nacks []nack) {
	acks = make([]databus.Delivery, 0, len(ms))
	for _, d := range ms {
		count := uint32(d.DeliveryCount)
		if count > 1 {
			c.redelivered.Add(1)
		}
		id, _, ok := c.idOf(d.Partition, d.Offset, metaOf(d))
		reason := ""
		switch {
		case !ok:
		case isPoison(id, c.cfg.Streams, c.cfg.PoisonKeys):
			reason = reasonPoison
		case nackedOnce(id, count, c.cfg.NackFraction):
			reason = reasonNacked
		}
		if reason == "" {
			acks = append(acks, d)
			continue
		}
		nacks = append(nacks, nack{d: d, reason: reason})
	}
	return acks, nacks
}
