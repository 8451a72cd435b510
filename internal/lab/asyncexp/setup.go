package asyncexp

import (
	"fmt"
	"github.com/highload-lab/hlab/internal/services/work"
	"runtime"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/app"
)

// The setup items the first claim's rows (sync and Kafka acked, 1
// connection) run with, passed where the experiment starts or loads
// them (Run.UsedInFirstClaim), so the declaration cannot drift from the
// run.
const (
	itemKafka    = "Kafka"
	itemProducer = "the async app's producer"
	itemSync     = "the sync app's call to the log service"
	itemQuotas   = "quotas"
	itemLoad     = "load"
)

// kafkaText is the Kafka a run with o records through: what lab.Kafka's
// Kind says of it, which the run passes.
func kafkaText(o lab.Options) string {
	switch {
	case len(o.External.KafkaBrokers) > 0:
		return "external brokers (--kafka-brokers): their version in the run's env"
	case o.Kafka == lab.KafkaReal:
		return "kafka " + deps.DefaultKafkaVersion + " (a single KRaft node, unconstrained)"
	}
	return "kfake (embedded default, in memory; its own process: hlab serve kfake, unconstrained)"
}

// producerText is how the app of mode produces an event.
func producerText(mode app.Mode) string {
	return fmt.Sprintf("hlab serve app --mode %s: franz-go (kgo), one client per app; each request produces its event and waits for its acknowledgement, within %v; linger 0; idempotent; acks from all in-sync replicas (the leader, with one broker); records of requests that arrive while a produce request is in flight share the next one",
		mode, app.DefaultTimeout)
}

// syncText is the sync app's call as it is configured.
func syncText(timeout time.Duration) string {
	return fmt.Sprintf("POST /events of the event as JSON (a UUID, a time, a random 100-char body), on a keep-alive client (up to 256 idle connections) with a %v timeout; the event log does 1001 x json.Marshal of a random 50-char string and answers \"event is saved!\"; the app answers \"done!\", 503 when the call fails", timeout)
}

// quotaText is the services' quotas.
func quotaText(cpu float64, memMB int) string {
	return fmt.Sprintf("app and log service (or its consumer) %g CPU and %d MB each; Kafka without limits", cpu, memMB)
}

// loadText is the closed-model load of the claims' rows.
func loadText(ns []int, run time.Duration) string {
	cs := make([]string, len(ns))
	for i, n := range ns {
		cs[i] = fmt.Sprint(n)
	}
	return fmt.Sprintf("hlab load in the lab's process over loopback, outside the quotas: closed model, %s connections, runs of %v; the claims' rows in rounds, their order alternating",
		strings.Join(cs, " and "), run)
}

// setupItems sets the experiment's setup beside the report's.
func setupItems(o lab.Options) []labresult.Setup {
	t := timings(o)
	before, outage, after := faultTiming(o)
	return []labresult.Setup{{
		Item:       itemKafka,
		Report:     "confluentinc/cp-kafka:7.0.1 (Apache Kafka 3.0) with cp-zookeeper:7.0.1, one broker, defaults; its log written through the page cache",
		Ours:       kafkaText(o),
		Why:        "no Docker and no Confluent images here. --kafka real runs Apache Kafka from Maven Central, in KRaft mode (ZooKeeper would be one more JVM, and Kafka 4 dropped it). kfake, the default, speaks Kafka's protocol in a Go process and keeps records in memory: its costs are not a JVM broker's, which --kafka real measures",
		FirstClaim: true,
	}, {
		Item:       itemProducer,
		Report:     "segmentio/kafka-go: kafka.DialLeader(\"broker:29092\", \"my-topic\", partition 0) once at start; every request calls conn.WriteMessages on that one Conn (acks=all, kafka-go's default), one produce request per event; a failed write is logged",
		Ours:       producerText(app.KafkaAck),
		Why:        "franz-go is the project's one Kafka client; kafka-go is not a dependency. At 1 connection both send one event per produce request and wait for it. At 3 the report's one Conn makes each request wait for the others' round trips, while ours puts concurrent events in one batch: that favours ours in claim 3",
		FirstClaim: true,
	}, {
		Item:       "topic",
		Report:     "one topic of one partition; the app writes, the consumer reads it",
		Ours:       "one topic of one partition; the app writes, the consumer reads it",
		FirstClaim: true,
	}, {
		Item:       "the consumer",
		Report:     "kafka.NewReader{Brokers, Topic, Partition: 0}: no group, no commits; per message 1001 x json.Marshal of a random 50-char string, then log.Print of the message",
		Ours:       "hlab serve eventlog --consume: a consumer-group member (franz-go) that commits after processing and recognizes redeliveries; the same log work per event, no print",
		Why:        "a group with commits lets the lab check that every event answered 200 was consumed, across restarts too; the consumer runs beside the load under its own quota, as the report's did",
		FirstClaim: true,
	}, {
		Item:       itemSync,
		Report:     "http.DefaultClient.Post(\"http://logs:8890/sendEvent\", \"application/json\", a random 100-char body): no timeout, at most 2 idle connections kept; the log service does 1001 x json.Marshal of a random 50-char string and answers \"event is saved!\"; the app answers \"done!\" with the log's answer, 200 even when the call fails",
		Ours:       syncText(app.DefaultTimeout),
		Why:        "the event carries an id so that it can be counted through every path; the client has timeouts, as every outward call of the project does; with 3 connections the report's default client keeps 2 idle connections and opens a new one for the third, which ours does not: that makes our sync faster, against claim 3",
		FirstClaim: true,
	}, {
		Item:       "the CPU work of /handle",
		Report:     work.ReportCode,
		Ours:       work.Code,
		FirstClaim: true,
	}, {
		Item:       itemQuotas,
		Report:     "app and log service (or its consumer) 0.2 CPU and 500 MB each; Kafka without limits",
		Ours:       quotaText(svcCPU, svcMemMB),
		FirstClaim: true,
	}, {
		Item:       itemLoad,
		Report:     "wrk -t1 -c1 -d5s and wrk -t3 -c3 -d5s, in a container on the compose network; its figures averaged over dozens of runs",
		Ours:       loadText(conns, t.run),
		Why:        "wrk's closed model (a connection sends its next request once answered), in the lab's own generator; rounds put the machine's noise on both rows alike, and the claims' intervals come from them",
		FirstClaim: true,
	}, {
		Item:       "Go",
		Report:     "go 1.19 (golang:1.19.0-alpine3.16)",
		Ours:       runtime.Version(),
		Why:        "the project's go.mod sets one Go for everything (franz-go needs 1.26); the older runtime would weigh on both sides of each ratio",
		FirstClaim: true,
	}, {
		Item:   "the async app's answer when Kafka does not take the event",
		Report: "the error logged, 200 \"done!\": the event is gone and the client does not know",
		Ours:   "503 with X-Failure and Retry-After within 2s (app.Config.Drop would answer 200 and count the event dropped)",
		Why:    "a 200 must mean the event is recorded, or no row can count what was lost; the claims' rows must answer every request successfully (99%) to count, so this shows in the fault row only",
	}, {
		Item:   "the fault rows' outage",
		Report: "not measured: \"one more point of failure, the bus, which has to be maintained\"",
		Ours:   fmt.Sprintf("open model at %d req/s; the broker (SIGKILLed: kfake, or the real broker) or, for the sync app, which has no broker, the event log (SIGKILLed) taken down %v into the load, started again %v later, the load going on %v more", faultRate, before, outage, after),
		Why:    "the report states the con; the rows measure it",
	}}
}
