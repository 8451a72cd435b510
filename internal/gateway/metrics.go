package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The metric kinds the gateway updates: prometheus's types, or nop when
// the instrumentation is off (Config.NoMetrics), so that the hot paths
// call the same methods either way and pay nothing when it is off.
type (
	counter interface {
		Inc()
		Add(float64)
	}
	gauge interface {
		Inc()
		Dec()
		Add(float64)
		Sub(float64)
		Set(float64)
	}
	observer interface{ Observe(float64) }

	counterVec interface{ WithLabelValues(...string) counter }
	gaugeVec   interface{ WithLabelValues(...string) gauge }
)

type metrics struct {
	streams        gaugeVec // by kind: publish, subscribe
	messagesIn     counter  // published and stored
	messagesOut    counter  // delivered to subscribers
	bytesIn        counter
	bytesOut       counter
	publishErrors  counterVec // records not stored, by code
	publishLatency observer   // batch received -> acked by Kafka
	unacked        gauge      // delivered, not yet acked
	held           gauge      // delivered, not yet passed by a commit point (what caps bound)
	acksIgnored    counter    // acks for unknown or revoked offsets
	commits        counterVec // by result: ok, error
	streamErrors   counterVec // streams ended with an error, by code
	refusals       counterVec // streams or batches refused, by limit
	kafkaClients   gaugeVec   // Kafka clients open, by kind
	sendTimeouts   counter    // subscribe streams ended because the client did not read
	rewinds        counter    // partitions restarted from their oldest unacked offset
	kafkaRequests  counterVec // requests written to Kafka, by API: the load the gateway puts on Kafka
	kafkaProduce   counter    // kafkaRequests' Produce child, resolved once
	publishBytes   gauge      // databus_bytes_in_flight's children, resolved once: they change per batch
	subscribeBytes gauge
	// databus_client_wait_seconds' children, resolved once: the time
	// streams spend waiting on their clients (see newMetrics).
	publishWait   observer
	subscribeWait observer
	// kafkaProduceBytes is databus_kafka_produce_bytes_total (nil when
	// off): it is only read once per producer, by produceHook.
	kafkaProduceBytes *prometheus.CounterVec
	// memberGraces counts group members' graces by how they ended
	// (membergrace.go).
	memberGraces counterVec

	// Replays (replay.go).
	replayMessages counter // messages sent on replay streams
	// Nacks, retries and dead letters.
	nacks          counterVec // by result: retry, dead_letter, ignored
	retriesPending gauge      // nacked messages held for redelivery or dead-lettering
	redeliveries   counter    // nacked messages sent again
	deadLetters    counterVec // dead-letter writes, by result: ok, error
	nackDelaysCut  counter    // nack delays cut to --max-nack-delay
	// retriesVanished: due retries whose record Kafka no longer has
	// (retention, compaction): acked, as they cannot be delivered.
	retriesVanished counter

	on bool // false: every field is nop
}

// nop is every metric kind, updating nothing.
type nop struct{}

func (nop) Inc()                            {}
func (nop) Dec()                            {}
func (nop) Add(float64)                     {}
func (nop) Sub(float64)                     {}
func (nop) Set(float64)                     {}
func (nop) Observe(float64)                 {}
func (nop) WithLabelValues(...string) gauge { return nop{} }

// nopCounters is a counterVec of nop (Go has no covariant results, so
// nop cannot be both vectors).
type nopCounters struct{}

func (nopCounters) WithLabelValues(...string) counter { return nop{} }

// promCounters and promGauges give prometheus's vectors the gateway's
// interfaces.
type (
	promCounters struct{ *prometheus.CounterVec }
	promGauges   struct{ *prometheus.GaugeVec }
)

func (v promCounters) WithLabelValues(lv ...string) counter {
	return v.CounterVec.WithLabelValues(lv...)
}
func (v promGauges) WithLabelValues(lv ...string) gauge { return v.GaugeVec.WithLabelValues(lv...) }

// offMetrics is the instrumentation switched off: nothing registered,
// nothing updated.
func offMetrics() *metrics {
	return &metrics{
		streams: nop{}, messagesIn: nop{}, messagesOut: nop{}, bytesIn: nop{}, bytesOut: nop{},
		publishErrors: nopCounters{}, publishLatency: nop{}, unacked: nop{}, held: nop{}, acksIgnored: nop{},
		commits: nopCounters{}, streamErrors: nopCounters{}, refusals: nopCounters{}, kafkaClients: nop{},
		sendTimeouts: nop{}, rewinds: nop{}, kafkaRequests: nopCounters{}, kafkaProduce: nop{},
		publishBytes: nop{}, subscribeBytes: nop{}, publishWait: nop{}, subscribeWait: nop{},
		replayMessages: nop{}, memberGraces: nopCounters{},
		nacks: nopCounters{}, retriesPending: nop{}, redeliveries: nop{}, deadLetters: nopCounters{}, nackDelaysCut: nop{},
		retriesVanished: nop{},
	}
}

func newMetrics(reg prometheus.Registerer) *metrics {
	streams := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "databus_streams", Help: "Open streams, by kind: publish, subscribe (group members' streams), replay.",
	}, []string{"kind"})
	messagesIn := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_messages_in_total", Help: "Messages published and stored in Kafka."})
	messagesOut := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_messages_out_total", Help: "Messages delivered to subscribers."})
	bytesIn := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_bytes_in_total", Help: "Key and value bytes of stored messages."})
	bytesOut := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_bytes_out_total", Help: "Key and value bytes delivered."})
	publishErrors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_publish_errors_total", Help: "Records not stored, by gRPC code.",
	}, []string{"code"})
	publishLatency := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "databus_publish_latency_seconds", Help: "From a batch's arrival to Kafka's ack of its last record.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50 µs .. 6.5 s
	})
	unacked := prometheus.NewGauge(prometheus.GaugeOpts{Name: "databus_unacked_messages", Help: "Messages delivered and not yet acked."})
	held := prometheus.NewGauge(prometheus.GaugeOpts{Name: "databus_held_offsets", Help: "Delivered offsets not yet passed by their partition's commit point (acked or not): what x-databus-max-unacked bounds per stream."})
	acksIgnored := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_acks_ignored_total", Help: "Acks for offsets not pending (unknown, repeated, or of a revoked partition)."})
	commits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_commits_total", Help: "Offset commits, by result.",
	}, []string{"result"})
	streamErrors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_stream_errors_total", Help: "Streams ended with an error status, by code.",
	}, []string{"code"})
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_refusals_total", Help: "Streams or batches refused with ResourceExhausted, by limit: streams (--max-streams), kafka_clients (--max-kafka-clients), stream_bytes (--max-stream-bytes), recv_bytes (a batch over gRPC's receive limit, an eighth above --max-stream-bytes).",
	}, []string{"limit"})
	kafkaClients := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "databus_kafka_clients", Help: "Kafka clients open or reserved, by kind: shared (the aggregated producer), producer (a publish stream's own), member (the one group member, fetching and committing, that serves all subscribe streams of a group and topic here), replay (a replay stream's own, in no group).",
	}, []string{"kind"})
	bytesInFlight := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "databus_bytes_in_flight", Help: "Message bytes in the gateway, by kind: publish (read, not yet answered), subscribe (fetched, not yet sent). --max-gateway-bytes bounds their sum.",
	}, []string{"kind"})
	sendTimeouts := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_send_timeouts_total", Help: "Subscribe streams ended because a send to the client blocked past --send-timeout."})
	rewinds := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_partition_rewinds_total", Help: "Partitions that moved between subscribe streams of one gateway while the stream they left held messages, restarted from the oldest of them (delivered again)."})
	kafkaRequests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_kafka_requests_total", Help: "Requests written to Kafka brokers, by API (Produce, Fetch, ...): aggregation shows here as fewer Produce requests per message.",
	}, []string{"api"})
	// The report's lesson metric: a gateway-side measure of the time spent
	// waiting for the clients' messages showed that clients opened their
	// streams (and with them their Kafka clients) long before they sent.
	clientWait := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "databus_client_wait_seconds",
		Help:    "Time streams spend waiting on their clients, by kind: publish, from asking gRPC for a stream's next batch until it arrives (the first from the stream's start); subscribe, how long each send of a batch is held by the client's flow control (a client that does not read).",
		Buckets: prometheus.ExponentialBuckets(100e-6, 4, 11), // 100 µs .. 105 s
	}, []string{"kind"})
	kafkaProduceBytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_kafka_produce_bytes_total", Help: "Record bytes of the batches written to Kafka, by the codec the producer was asked for and form: uncompressed (the records as serialized) and compressed (as sent and stored; equal to uncompressed for a batch the codec did not shrink, which goes uncompressed). Record batch headers are not counted.",
	}, []string{"codec", "form"})
	// Replays (replay.go).
	replayMessages := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_replay_messages_total", Help: "Messages sent on replay streams (x-databus-start-time or x-databus-start-offsets), which no group acks or commits; not counted in databus_messages_out_total."})
	reg.MustRegister(replayMessages)
	nacks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_nacks_total", Help: "Nacks from subscribers, by result: retry (redelivered after its delay), dead_letter (sent to its dead-letter topic: its delivery count reached x-databus-max-deliveries), ignored (of a message not held, or already acked or nacked).",
	}, []string{"result"})
	retriesPending := prometheus.NewGauge(prometheus.GaugeOpts{Name: "databus_retries_pending", Help: "Nacked messages held for redelivery or dead-lettering; --max-pending-retries bounds them."})
	redeliveries := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_redeliveries_total", Help: "Nacked messages delivered again after their delay."})
	deadLetters := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_dead_letters_total", Help: "Writes of dead letters to their topics, by result: ok (stored: the offset counts as acked), error (retried after a backoff).",
	}, []string{"result"})
	nackDelaysCut := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_nack_delays_cut_total", Help: "Nacks whose delay was cut to --max-nack-delay."})
	retriesVanished := prometheus.NewCounter(prometheus.CounterOpts{Name: "databus_retries_vanished_total", Help: "Nacked messages not redelivered because Kafka no longer had them when their delay ended (retention or compaction removed them): counted as acked."})
	reg.MustRegister(nacks, retriesPending, redeliveries, deadLetters, nackDelaysCut, retriesVanished)
	// Every result exists from the start at 0, so that an alert's rate()
	// sees the first dead-letter error, not a series that just appeared.
	for _, r := range []string{"retry", "dead_letter", "ignored"} {
		nacks.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "error"} {
		deadLetters.WithLabelValues(r)
	}
	reg.MustRegister(streams, messagesIn, messagesOut, bytesIn, bytesOut, publishErrors,
		publishLatency, unacked, held, acksIgnored, commits, streamErrors, refusals, kafkaClients, bytesInFlight, sendTimeouts, rewinds, kafkaRequests, clientWait, kafkaProduceBytes)
	return &metrics{
		streams: promGauges{streams}, messagesIn: messagesIn, messagesOut: messagesOut, bytesIn: bytesIn, bytesOut: bytesOut,
		publishErrors: promCounters{publishErrors}, publishLatency: publishLatency, unacked: unacked, held: held, acksIgnored: acksIgnored,
		commits: promCounters{commits}, streamErrors: promCounters{streamErrors}, refusals: promCounters{refusals}, kafkaClients: promGauges{kafkaClients},
		sendTimeouts: sendTimeouts, rewinds: rewinds, kafkaRequests: promCounters{kafkaRequests},
		kafkaProduce:      kafkaRequests.WithLabelValues(kmsg.NameForKey(int16(kmsg.Produce))),
		publishBytes:      bytesInFlight.WithLabelValues("publish"),
		subscribeBytes:    bytesInFlight.WithLabelValues("subscribe"),
		publishWait:       clientWait.WithLabelValues("publish"),
		subscribeWait:     clientWait.WithLabelValues("subscribe"),
		kafkaProduceBytes: kafkaProduceBytes,
		memberGraces:      newMemberGraces(reg),
		replayMessages:    replayMessages,
		nacks:             promCounters{nacks}, retriesPending: retriesPending, redeliveries: redeliveries,
		deadLetters: promCounters{deadLetters}, nackDelaysCut: nackDelaysCut,
		retriesVanished: retriesVanished,
		on:              true,
	}
}

// produceHook is the hook of a producer of codec: its counters resolved
// once, as the hook runs per batch.
func (m *metrics) produceHook(codec string) produceBytesHook {
	return produceBytesHook{
		uncompressed: m.kafkaProduceBytes.WithLabelValues(codec, "uncompressed"),
		compressed:   m.kafkaProduceBytes.WithLabelValues(codec, "compressed"),
	}
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
