package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/services/eventlog"
)

// kafkaProducer is what the two Kafka recorders share: the franz-go
// client that produces to the topic, and whether the topic exists yet.
// Until it does, events are refused, since Kafka would fail them after
// accepting. Its background work (awaitTopic, and what a recorder adds
// with spawn) runs until stop.
type kafkaProducer struct {
	cl    *kgo.Client
	topic string

	isReady  atomic.Bool
	readyMu  sync.Mutex
	readyErr error // why not ready yet

	ctx    context.Context // ends the background work
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newKafkaProducer makes the client, with cfg's brokers, topic and
// connect timeout, the broker errors counted in m, and a recorder's own
// opts, and starts waiting for the topic.
func newKafkaProducer(cfg Config, m *metrics, opts ...kgo.Opt) (*kafkaProducer, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.DialTimeout(cfg.ConnectTimeout),
		kgo.WithHooks(&brokerHooks{m: m}),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("app: kafka client: %w", err)
	}
	p := &kafkaProducer{cl: cl, topic: cfg.Topic}
	p.readyErr = fmt.Errorf("app: waiting for kafka at %v and topic %q", cfg.Brokers, cfg.Topic)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.spawn(p.awaitTopic)
	return p, nil
}

// spawn runs f in the background until stop.
func (p *kafkaProducer) spawn(f func(context.Context)) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f(p.ctx)
	}()
}

// stop ends the background work and waits for it; the client stays open.
func (p *kafkaProducer) stop() {
	p.cancel()
	p.wg.Wait()
}

// awaitTopic asks Kafka for the topic until it is there.
func (p *kafkaProducer) awaitTopic(ctx context.Context) {
	adm := kadm.NewClient(p.cl)
	for ctx.Err() == nil {
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		md, err := adm.Metadata(mctx, p.topic)
		cancel()
		if err == nil {
			t, ok := md.Topics[p.topic]
			switch {
			case !ok:
				err = fmt.Errorf("app: topic %q not in kafka's metadata", p.topic)
			case t.Err != nil:
				err = fmt.Errorf("app: topic %q: %w (create it first)", p.topic, t.Err)
			default:
				p.isReady.Store(true)
				return
			}
		}
		p.readyMu.Lock()
		p.readyErr = fmt.Errorf("app: kafka not ready: %w", err)
		p.readyMu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *kafkaProducer) ready() error {
	if p.isReady.Load() {
		return nil
	}
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	return p.readyErr
}

// notReady refuses an event while the topic is not found yet.
func (p *kafkaProducer) notReady() error {
	if p.isReady.Load() {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrKafkaUnreachable, p.ready())
}

// newRecord is an event as both Kafka recorders produce it.
func newRecord(ev eventlog.Event, payload []byte) *kgo.Record {
	return &kgo.Record{
		Key:     []byte(ev.ID),
		Value:   payload,
		Headers: []kgo.RecordHeader{{Key: eventlog.RecordIDHeader, Value: []byte(ev.ID)}},
	}
}

// kafkaRecorder produces each event to Kafka and returns once it is
// buffered (async); see the package doc for its bounds.
type kafkaRecorder struct {
	*kafkaProducer
	limit    int64
	deadline time.Duration
	m        *metrics
	log      *slog.Logger

	pending      atomic.Int64
	lastProgress atomic.Int64 // Unix ns: the last ack, or when the buffer turned non-empty

	lossMu     sync.Mutex
	lossLogged time.Time
}

func newKafkaRecorder(cfg Config, m *metrics) (*kafkaRecorder, error) {
	p, err := newKafkaProducer(cfg, m,
		// Our own count (limit) refuses events first; franz-go's bound is
		// a backstop that never triggers before it.
		kgo.MaxBufferedRecords(2*cfg.Buffer),
		// An accepted event has no delivery deadline: it waits for Kafka
		// to come back, within the buffer's bound. Retries are unlimited
		// (franz-go's default) and idempotent.
		kgo.RecordDeliveryTimeout(0),
	)
	if err != nil {
		return nil, err
	}
	k := &kafkaRecorder{kafkaProducer: p, limit: int64(cfg.Buffer), deadline: cfg.KafkaDeadline, m: m, log: cfg.Logger}
	p.spawn(k.watch)
	return k, nil
}

// watch keeps the unreachable gauge current while nothing is produced.
func (k *kafkaRecorder) watch(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.unreachable()
		}
	}
}

// unreachable reports whether events wait and Kafka stored none for the
// deadline.
func (k *kafkaRecorder) unreachable() bool {
	stalled := k.pending.Load() > 0 && time.Since(time.Unix(0, k.lastProgress.Load())) > k.deadline
	if stalled {
		k.m.unreachable.Set(1)
	} else {
		k.m.unreachable.Set(0)
	}
	return stalled
}

func (k *kafkaRecorder) record(_ context.Context, ev eventlog.Event, payload []byte) error {
	if err := k.notReady(); err != nil {
		return err
	}
	if k.unreachable() {
		return fmt.Errorf("%w: %d events wait and none was stored for %v", ErrKafkaUnreachable, k.pending.Load(), k.deadline)
	}
	for {
		p := k.pending.Load()
		if p >= k.limit {
			return fmt.Errorf("%w (%d events wait)", ErrBufferFull, p)
		}
		if k.pending.CompareAndSwap(p, p+1) {
			if p == 0 {
				k.lastProgress.Store(time.Now().UnixNano())
			}
			break
		}
	}
	k.m.pending.Inc()
	// The record outlives the request: not the request's context.
	k.cl.TryProduce(context.Background(), newRecord(ev, payload), k.done)
	return nil
}

// done is franz-go's promise for an accepted record.
func (k *kafkaRecorder) done(r *kgo.Record, err error) {
	k.pending.Add(-1)
	k.m.pending.Dec()
	if err == nil {
		k.lastProgress.Store(time.Now().UnixNano())
		k.m.delivered.Inc()
		return
	}
	k.m.lost.Inc()
	k.m.errors.WithLabelValues(deliveryKind(err)).Inc()
	k.lossMu.Lock()
	defer k.lossMu.Unlock()
	if time.Since(k.lossLogged) > time.Second { // one line a second at most
		k.lossLogged = time.Now()
		k.log.Error("app: kafka failed an accepted event for good: it is lost (counted in app_events_lost_total)", "id", string(r.Key), "kind", eventlog.ErrorKind(err), "err", err)
	}
}

func (k *kafkaRecorder) close(ctx context.Context) error {
	k.stop()
	var err error
	if ferr := k.cl.Flush(ctx); ferr != nil {
		err = fmt.Errorf("app: %d accepted events were not stored by kafka before the flush deadline; they are lost: %w", k.pending.Load(), ferr)
		k.log.Error(err.Error())
	}
	k.cl.Close() // fails what is still buffered: counted as lost by done
	return err
}

// kafkaAckRecorder produces each event to Kafka and returns once Kafka
// acknowledged it (kafka-ack): report A2's own "async" handler, which
// waited for kafka-go's conn.WriteMessages on the leader's connection.
// franz-go batches per partition, so the records of requests that arrive
// while a produce request is in flight share the next one; each request
// still waits for its own record's acknowledgement only.
type kafkaAckRecorder struct {
	*kafkaProducer
	timeout time.Duration
}

func newKafkaAckRecorder(cfg Config, m *metrics) (*kafkaAckRecorder, error) {
	p, err := newKafkaProducer(cfg, m,
		// franz-go lingers 10 ms by default since v1.20 (v1.22.2's
		// defaultCfg): a partition waits that long for more records
		// before its batch is sent, and a request waiting for its ack
		// would pay it every time. kafka-go's conn.WriteMessages wrote at
		// once; so do we.
		kgo.ProducerLinger(0),
		// franz-go's default, spelled out: the answer means the in-sync
		// replicas stored the event (with replication 1, the leader, as
		// with kafka-go's conn). Retries are idempotent, so a retried
		// record is not stored twice.
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		return nil, err
	}
	return &kafkaAckRecorder{kafkaProducer: p, timeout: cfg.Timeout}, nil
}

func (k *kafkaAckRecorder) record(ctx context.Context, ev eventlog.Event, payload []byte) error {
	if err := k.notReady(); err != nil {
		return err
	}
	// The record gets the request's deadline but not its cancellation:
	// when the first record of a batch is canceled, franz-go fails every
	// record buffered for its partition, so a client that leaves must not
	// fail other requests' events. The promise releases the context.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.timeout)
	acked := make(chan error, 1)
	k.cl.Produce(rctx, newRecord(ev, payload), func(_ *kgo.Record, err error) {
		acked <- err
		cancel() // after the send: whoever sees rctx end finds the answer
	})
	select {
	case err := <-acked:
		return produceError(err, k.timeout)
	case <-rctx.Done():
		// At the deadline franz-go fails the record only when that is
		// safe: not while a produce request for its partition is
		// unanswered (an idempotent producer cannot tell whether Kafka
		// stored it). The request does not wait for that: the event
		// may still be stored later, but it is not answered 200.
		select {
		case err := <-acked:
			return produceError(err, k.timeout)
		default:
			return fmt.Errorf("%w: kafka did not acknowledge the event within %v", ErrTimeout, k.timeout)
		}
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrClientGone, ctx.Err())
	}
}

// close releases the client. Every answered event was acknowledged
// already; what is still buffered belongs to requests answered 503.
func (k *kafkaAckRecorder) close(context.Context) error {
	k.stop()
	k.cl.Close()
	return nil
}

// brokerHooks counts the producer's broker errors by kind.
type brokerHooks struct{ m *metrics }

var (
	_ kgo.HookBrokerConnect = (*brokerHooks)(nil)
	_ kgo.HookBrokerWrite   = (*brokerHooks)(nil)
	_ kgo.HookBrokerRead    = (*brokerHooks)(nil)
)

func (h *brokerHooks) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.m.kafkaErrors.WithLabelValues("connect", eventlog.ErrorKind(err)).Inc()
	}
}

func (h *brokerHooks) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.m.kafkaErrors.WithLabelValues("write", eventlog.ErrorKind(err)).Inc()
	}
}

func (h *brokerHooks) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.m.kafkaErrors.WithLabelValues("read", eventlog.ErrorKind(err)).Inc()
	}
}
