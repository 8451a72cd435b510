package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/services/eventlog"
)

// syncRecorder POSTs each event to the event log and waits for its answer.
type syncRecorder struct {
	url     string
	timeout time.Duration
	client  *http.Client
}

func newSyncRecorder(cfg Config) *syncRecorder {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &syncRecorder{
		url:     strings.TrimSuffix(cfg.EventLog, "/") + "/events",
		timeout: cfg.Timeout,
		client: &http.Client{
			Timeout: cfg.Timeout, // the request's context carries it too; this also bounds the body
			Transport: &http.Transport{
				DialContext:           dialer.DialContext,
				ResponseHeaderTimeout: cfg.Timeout,
				MaxIdleConnsPerHost:   min(cfg.MaxInflight, 256),
				MaxConnsPerHost:       cfg.MaxInflight,
				IdleConnTimeout:       90 * time.Second,
				DisableCompression:    true,
			},
		},
	}
}

func (s *syncRecorder) record(ctx context.Context, ev eventlog.Event, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("app: event log request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(eventlog.IDHeader, ev.ID)
	resp, err := s.client.Do(req)
	if err != nil {
		return httpError(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return httpError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	return nil
}

// httpError maps a failed POST to the errors of errors.go.
func httpError(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", ErrClientGone, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: the event log: %v", ErrTimeout, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the event log: %v", ErrUnreachable, err)
	}
	return fmt.Errorf("app: posting the event: %w", err)
}

func (s *syncRecorder) ready() error { return nil }

func (s *syncRecorder) close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}

// kafkaRecorder produces each event to Kafka and returns once it is
// buffered; see the package doc for its bounds.
type kafkaRecorder struct {
	cl       *kgo.Client
	topic    string
	limit    int64
	deadline time.Duration
	m        *metrics
	log      *slog.Logger

	pending      atomic.Int64
	lastProgress atomic.Int64 // Unix ns: the last ack, or when the buffer turned non-empty
	isReady      atomic.Bool
	readyMu      sync.Mutex
	readyErr     error // why not ready yet
	stop         context.CancelFunc
	wg           sync.WaitGroup

	lossMu     sync.Mutex
	lossLogged time.Time
}

func newKafkaRecorder(cfg Config, m *metrics) (*kafkaRecorder, error) {
	k := &kafkaRecorder{topic: cfg.Topic, limit: int64(cfg.Buffer), deadline: cfg.KafkaDeadline, m: m, log: cfg.Logger}
	k.readyErr = fmt.Errorf("app: waiting for kafka at %v and topic %q", cfg.Brokers, cfg.Topic)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.DialTimeout(cfg.ConnectTimeout),
		// Our own count (limit) refuses events first; franz-go's bound is
		// a backstop that never triggers before it.
		kgo.MaxBufferedRecords(2*cfg.Buffer),
		// An accepted event has no delivery deadline: it waits for Kafka
		// to come back, within the buffer's bound. Retries are unlimited
		// (franz-go's default) and idempotent.
		kgo.RecordDeliveryTimeout(0),
		kgo.WithHooks(&brokerHooks{m: m}),
	)
	if err != nil {
		return nil, fmt.Errorf("app: kafka client: %w", err)
	}
	k.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	k.stop = cancel
	k.wg.Add(2)
	go func() { defer k.wg.Done(); k.awaitTopic(ctx) }()
	go func() { defer k.wg.Done(); k.watch(ctx) }()
	return k, nil
}

// awaitTopic asks Kafka for the topic until it is there: before that,
// events are refused, since Kafka would fail them after accepting.
func (k *kafkaRecorder) awaitTopic(ctx context.Context) {
	adm := kadm.NewClient(k.cl)
	for ctx.Err() == nil {
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		md, err := adm.Metadata(mctx, k.topic)
		cancel()
		if err == nil {
			t, ok := md.Topics[k.topic]
			switch {
			case !ok:
				err = fmt.Errorf("app: topic %q not in kafka's metadata", k.topic)
			case t.Err != nil:
				err = fmt.Errorf("app: topic %q: %w (create it first)", k.topic, t.Err)
			default:
				k.isReady.Store(true)
				return
			}
		}
		k.readyMu.Lock()
		k.readyErr = fmt.Errorf("app: kafka not ready: %w", err)
		k.readyMu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
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

func (k *kafkaRecorder) ready() error {
	if k.isReady.Load() {
		return nil
	}
	k.readyMu.Lock()
	defer k.readyMu.Unlock()
	return k.readyErr
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
	if !k.isReady.Load() {
		return fmt.Errorf("%w: %v", ErrKafkaUnreachable, k.ready())
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
	rec := &kgo.Record{
		Key:     []byte(ev.ID),
		Value:   payload,
		Headers: []kgo.RecordHeader{{Key: eventlog.RecordIDHeader, Value: []byte(ev.ID)}},
	}
	// The record outlives the request: not the request's context.
	k.cl.TryProduce(context.Background(), rec, k.done)
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
	k.wg.Wait()
	var err error
	if ferr := k.cl.Flush(ctx); ferr != nil {
		err = fmt.Errorf("app: %d accepted events were not stored by kafka before the flush deadline; they are lost: %w", k.pending.Load(), ferr)
		k.log.Error(err.Error())
	}
	k.cl.Close() // fails what is still buffered: counted as lost by done
	return err
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

// databusRecorder publishes each event through the databus gateway and
// waits until Kafka stored it.
type databusRecorder struct {
	client  *databus.Client
	pub     *databus.Publisher
	timeout time.Duration
}

func newDatabusRecorder(cfg Config) (*databusRecorder, error) {
	c, err := databus.Dial(cfg.Databus)
	if err != nil {
		return nil, fmt.Errorf("app: databus gateway at %s: %w", cfg.Databus, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	pub, err := c.NewPublisher(ctx, cfg.Topic)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("app: databus publisher for %q: %w", cfg.Topic, err)
	}
	return &databusRecorder{client: c, pub: pub, timeout: cfg.Timeout}, nil
}

func (d *databusRecorder) record(ctx context.Context, ev eventlog.Event, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	err := d.pub.Publish(ctx, databus.Message{
		Key: []byte(ev.ID), Value: payload,
		Headers: []databus.Header{{Key: eventlog.RecordIDHeader, Value: []byte(ev.ID)}},
	})
	if err != nil {
		return gatewayError(ctx, err)
	}
	return nil
}

func (d *databusRecorder) ready() error { return nil }

func (d *databusRecorder) close(ctx context.Context) error {
	closed := make(chan struct{})
	go func() { d.pub.Close(); close(closed) }() // waits for answers to what is in flight
	var err error
	select {
	case <-closed:
	case <-ctx.Done():
		err = errors.New("app: the databus gateway did not answer the publishes in flight before the flush deadline")
	}
	d.client.Close()
	return err
}
