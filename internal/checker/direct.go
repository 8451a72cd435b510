package checker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The direct mode (Config.Direct, --direct) is the baseline the gateway's
// publish cost is judged against: the same streams, batches, in-flight
// limit, values and headers, produced by franz-go straight to Kafka, one
// kgo client per stream configured as the gateway configures a stream's
// own producer (aggregation off): no linger, acks from all in-sync
// replicas, batches up to 1 MiB. Run as a process of its own, its CPU
// per message is what a service producing to Kafka itself would spend.
//
// A batch is done when Kafka answered each of its records; records
// Kafka refused count as failed, the others as acked, exactly as a
// gateway's partial failure does. Consumer groups, when asked for, read
// through the gateway at Target (the direct producer writes the headers
// the consumers check), so that delivery is verified the same way.

// direct publishes straight to Kafka. Its counters, ledger and latency
// histogram are a publishers' (those of the gateway's streams), so that
// the result's figures are computed by the same code.
type direct struct {
	*publishers
	clients  []*kgo.Client
	requests produceRequests
}

// produceRequests counts the Produce requests a run's producers write to
// Kafka in the measured window (a kgo.HookBrokerWrite), the gateway's
// databus_kafka_requests_total{api="Produce"} of the direct mode: the
// records per request, which the offered rate sets, are compared with
// the gateway's beside the CPU per message.
type produceRequests struct {
	win atomic.Pointer[window] // nil until publishing starts
	n   atomic.Int64
}

func (r *produceRequests) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != int16(kmsg.Produce) || err != nil {
		return
	}
	if w := r.win.Load(); w != nil && w.contains(time.Now()) {
		r.n.Add(1)
	}
}

var _ kgo.HookBrokerWrite = (*produceRequests)(nil)

// publishSide is what publishes a run's messages: the gateway's streams
// (publishers) or Kafka producers of the checker's own (direct).
type publishSide interface {
	open(ctx context.Context) error
	publish(ctx context.Context, begin time.Time, win window)
	close()
	stats() *publishers
}

func (p *publishers) stats() *publishers { return p }

func newPublishSide(cfg *Config, run uint64, led *ledger, errs *errorCounts) publishSide {
	p := newPublishers(cfg, run, led, errs)
	if cfg.Direct {
		return &direct{publishers: p}
	}
	return p
}

// validateDirect checks what the direct mode cannot do: there is no
// gateway to aggregate, kill or measure.
func (c *Config) validateDirect() error {
	if !c.Direct {
		return nil
	}
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: --direct produces straight to Kafka: give --brokers host:port,...", ErrConfig)
	case c.Scenario != Throughput && c.Scenario != Latency:
		return fmt.Errorf("%w: --direct runs the throughput and latency scenarios (echo and ticker measure the gateway itself): use --scenario throughput or latency", ErrConfig)
	case c.Aggregation:
		return fmt.Errorf("%w: --direct gives each stream a producer of its own, as the gateway does with aggregation off: drop --aggregation", ErrConfig)
	case c.Connections != 0:
		return fmt.Errorf("%w: --direct has no gRPC connections to share: drop --connections and --share", ErrConfig)
	case c.KillEvery != 0 || c.GatewayCmd != "" || c.FaultCmd != "" || c.Inject != nil || c.DropMember:
		return fmt.Errorf("%w: --direct runs no gateway to inject faults into: drop --kill-every, --gateway-cmd, --fault-cmd and --drop-member", ErrConfig)
	case c.Compression != "":
		return fmt.Errorf("%w: --direct writes with franz-go's default codec (snappy, the gateway's default): drop --compression", ErrConfig)
	case c.GatewayMetrics != "":
		return fmt.Errorf("%w: --direct runs no gateway whose memory to read: drop --gateway-metrics", ErrConfig)
	}
	return nil
}

// open starts a Kafka client per stream and produces one message on
// each, waiting for Kafka's answer, as publishers.open does through the
// gateway.
func (d *direct) open(ctx context.Context) error {
	d.clients = make([]*kgo.Client, d.cfg.Streams)
	return forEach(ctx, d.cfg.Streams, openWorkers, func(ctx context.Context, i int) error {
		cl, err := newKafkaClient(d.cfg.Brokers, d.cfg.kafkaOpts,
			kgo.DefaultProduceTopic(d.cfg.topicOf(i)),
			kgo.ProducerLinger(0),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchMaxBytes(1<<20),
			kgo.WithHooks(&d.requests),
		)
		if err != nil {
			return fmt.Errorf("checker: stream %d: %w", i, err)
		}
		d.clients[i] = cl
		ids, recs := d.records(i, 1, time.Now())
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			d.countKafkaErr(err, 1)
			return fmt.Errorf("checker: first message on stream %d, straight to Kafka at %v: %w (is the broker up and the topic there?)", i, d.cfg.Brokers, err)
		}
		d.led.ack(i, ids)
		d.acked.Add(1)
		return nil
	})
}

// records makes stream's next n records, sent at sent: the values and
// headers the gateway would write for the same messages.
func (d *direct) records(stream, n int, sent time.Time) ([]ID, []*kgo.Record) {
	ids := make([]ID, n)
	recs := make([]*kgo.Record, n)
	for j := range n {
		id := ID{Stream: stream, Seq: d.seqs[stream]}
		d.seqs[stream]++
		ids[j] = id
		recs[j] = &kgo.Record{Value: d.values.of(stream, id.Seq), Headers: []kgo.RecordHeader{{Key: metaHeader, Value: encodeMeta(d.run, id, sent)}}}
	}
	return ids, recs
}

// publish runs every stream from begin until the window ends, then waits
// for the batches in flight.
func (d *direct) publish(ctx context.Context, begin time.Time, win window) {
	d.requests.win.Store(&win)
	d.runStreams(ctx, begin, win, len(d.clients), d.stream)
}

func (d *direct) stream(ctx context.Context, i int) {
	cl := d.clients[i]
	slots := make(chan struct{}, d.cfg.Inflight)
	pace := newPacer(d.begin, d.cfg.batchPeriod())
	defer pace.stop()
	for pace.wait(ctx, d.win.end) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		t0 := time.Now()
		if ctx.Err() != nil || t0.After(d.win.end) {
			break
		}
		ids, recs := d.records(i, d.cfg.Batch, t0)
		d.batchesStarted.Add(1)
		b := &directBatch{failed: make([]bool, len(recs))}
		b.left.Store(int32(len(recs)))
		for j, r := range recs {
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					b.failed[j] = true
					d.countKafkaErr(err, 1)
				}
				if b.left.Add(-1) == 0 {
					d.batchDone(i, ids, b.failed, t0)
					<-slots
				}
			})
		}
	}
	// What is in flight: answered, or failed by the client's delivery
	// timeout. Flush returns once every record has its answer.
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(d.cfg.DrainTimeout, time.Second))
	defer cancel()
	cl.Flush(flushCtx)
}

// directBatch is one batch's records waiting for Kafka's answers; each
// callback writes only its own entry of failed, and the last one reads
// them all (after left reached zero).
type directBatch struct {
	left   atomic.Int32
	failed []bool
}

// batchDone records a batch once Kafka answered all of its records.
func (d *direct) batchDone(stream int, ids []ID, failed []bool, t0 time.Time) {
	now := time.Now()
	stored := ids[:0:0]
	for j, id := range ids {
		if !failed[j] {
			stored = append(stored, id)
		}
	}
	d.answered(stream, stored, len(ids), t0, now)
}

// countKafkaErr counts a record Kafka did not store, by the error's name.
func (d *direct) countKafkaErr(err error, n int64) {
	kind := "kafka"
	switch {
	case errors.Is(err, context.Canceled):
		kind = "Canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		kind = "DeadlineExceeded"
	}
	d.errs.add(kind, n)
}

// close closes every Kafka client.
func (d *direct) close() {
	for _, cl := range d.clients {
		if cl != nil {
			cl.Close()
		}
	}
}
