package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type metrics struct {
	streams        *prometheus.GaugeVec // by kind: publish, subscribe
	messagesIn     prometheus.Counter   // published and stored
	messagesOut    prometheus.Counter   // delivered to subscribers
	bytesIn        prometheus.Counter
	bytesOut       prometheus.Counter
	publishErrors  *prometheus.CounterVec // records not stored, by code
	publishLatency prometheus.Histogram   // batch received -> acked by Kafka
	unacked        prometheus.Gauge       // delivered, not yet acked
	held           prometheus.Gauge       // delivered, not yet passed by a commit point (what caps bound)
	acksIgnored    prometheus.Counter     // acks for unknown or revoked offsets
	commits        *prometheus.CounterVec // by result: ok, error
	streamErrors   *prometheus.CounterVec // streams ended with an error, by code
	refusals       *prometheus.CounterVec // streams or batches refused, by limit
	kafkaClients   *prometheus.GaugeVec   // Kafka clients open, by kind
	bytesInFlight  *prometheus.GaugeVec   // message bytes in flight, by kind: publish, subscribe
	sendTimeouts   prometheus.Counter     // subscribe streams ended because the client did not read
	rewinds        prometheus.Counter     // partitions restarted from their oldest unacked offset
	kafkaRequests  *prometheus.CounterVec // requests written to Kafka, by API: the load the gateway puts on Kafka
	kafkaProduce   prometheus.Counter     // kafkaRequests' Produce child, resolved once
	publishBytes   prometheus.Gauge       // bytesInFlight's children, resolved once: they change per batch
	subscribeBytes prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "databus_streams", Help: "Open streams, by kind.",
		}, []string{"kind"}),
		messagesIn:  prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_messages_in_total", Help: "Messages published and stored in Kafka."}),
		messagesOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_messages_out_total", Help: "Messages delivered to subscribers."}),
		bytesIn:     prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_bytes_in_total", Help: "Key and value bytes of stored messages."}),
		bytesOut:    prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_bytes_out_total", Help: "Key and value bytes delivered."}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "databus_publish_errors_total", Help: "Records not stored, by gRPC code.",
		}, []string{"code"}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "databus_publish_latency_seconds", Help: "From a batch's arrival to Kafka's ack of its last record.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50 µs .. 6.5 s
		}),
		unacked:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "databus_unacked_messages", Help: "Messages delivered and not yet acked."}),
		held:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "databus_held_offsets", Help: "Delivered offsets not yet passed by their partition's commit point (acked or not): what x-databus-max-unacked bounds per stream."}),
		acksIgnored: prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_acks_ignored_total", Help: "Acks for offsets not pending (unknown, repeated, or of a revoked partition)."}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "databus_commits_total", Help: "Offset commits, by result.",
		}, []string{"result"}),
		streamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "databus_stream_errors_total", Help: "Streams ended with an error status, by code.",
		}, []string{"code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "databus_refusals_total", Help: "Streams or batches refused with ResourceExhausted, by limit: streams (--max-streams), kafka_clients (--max-kafka-clients), stream_bytes (--max-stream-bytes).",
		}, []string{"limit"}),
		kafkaClients: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "databus_kafka_clients", Help: "Kafka clients open or reserved, by kind: shared (the aggregated producer), producer (a publish stream's own), member (the one group member, fetching and committing, that serves all subscribe streams of a group and topic here).",
		}, []string{"kind"}),
		bytesInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "databus_bytes_in_flight", Help: "Message bytes in the gateway, by kind: publish (read, not yet answered), subscribe (fetched, not yet sent). --max-gateway-bytes bounds their sum.",
		}, []string{"kind"}),
		sendTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_send_timeouts_total", Help: "Subscribe streams ended because a send to the client blocked past --send-timeout."}),
		rewinds:      prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_partition_rewinds_total", Help: "Partitions that moved between subscribe streams of one gateway while the stream they left held messages, restarted from the oldest of them (delivered again)."}),
		kafkaRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "databus_kafka_requests_total", Help: "Requests written to Kafka brokers, by API (Produce, Fetch, ...): aggregation shows here as fewer Produce requests per message.",
		}, []string{"api"}),
	}
	m.kafkaProduce = m.kafkaRequests.WithLabelValues(kmsg.NameForKey(int16(kmsg.Produce)))
	m.publishBytes = m.bytesInFlight.WithLabelValues("publish")
	m.subscribeBytes = m.bytesInFlight.WithLabelValues("subscribe")
	reg.MustRegister(m.streams, m.messagesIn, m.messagesOut, m.bytesIn, m.bytesOut, m.publishErrors,
		m.publishLatency, m.unacked, m.held, m.acksIgnored, m.commits, m.streamErrors, m.refusals, m.kafkaClients, m.bytesInFlight, m.sendTimeouts, m.rewinds, m.kafkaRequests)
	return m
}

// kafkaHook counts the requests every Kafka client of the gateway writes.
type kafkaHook struct{ m *metrics }

var _ kgo.HookBrokerWrite = kafkaHook{}

func (h kafkaHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	if key == int16(kmsg.Produce) {
		h.m.kafkaProduce.Inc()
		return
	}
	h.m.kafkaRequests.WithLabelValues(kmsg.NameForKey(key)).Inc()
}
