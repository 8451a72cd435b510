package gateway

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	streams        *prometheus.GaugeVec // by kind: publish, subscribe
	messagesIn     prometheus.Counter   // published and stored
	messagesOut    prometheus.Counter   // delivered to subscribers
	bytesIn        prometheus.Counter
	bytesOut       prometheus.Counter
	publishErrors  *prometheus.CounterVec // records not stored, by code
	publishLatency prometheus.Histogram   // batch received -> acked by Kafka
	unacked        prometheus.Gauge       // delivered, not yet acked
	acksIgnored    prometheus.Counter     // acks for unknown or revoked offsets
	commits        *prometheus.CounterVec // by result: ok, error
	streamErrors   *prometheus.CounterVec // streams ended with an error, by code
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
		acksIgnored: prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_acks_ignored_total", Help: "Acks for offsets not pending (unknown, repeated, or of a revoked partition)."}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "databus_commits_total", Help: "Offset commits, by result.",
		}, []string{"result"}),
		streamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "databus_stream_errors_total", Help: "Streams ended with an error status, by code.",
		}, []string{"code"}),
	}
	reg.MustRegister(m.streams, m.messagesIn, m.messagesOut, m.bytesIn, m.bytesOut, m.publishErrors,
		m.publishLatency, m.unacked, m.acksIgnored, m.commits, m.streamErrors)
	return m
}
