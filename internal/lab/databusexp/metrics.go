package databusexp

import "github.com/highload-lab/hlab/internal/labresult"

// The checker driver's own figures (Checker, per run; a row's is the
// median over its runs).
var (
	batchesPerS = labresult.Metric{Name: "batches_per_s", Unit: "batches/s", Better: labresult.Higher,
		Doc: "publish requests (batches of messages) the gateway acked per second"}
	duplicates = labresult.Metric{Name: "duplicates", Better: labresult.Lower,
		Doc: "messages a verifying consumer group received more than once (at-least-once delivery allows them)"}
	receivedPerS = labresult.Metric{Name: "received_per_s", Unit: "msg/s", Better: labresult.Higher,
		Doc: "messages the consumer groups received per second"}
	cyclesPerS = labresult.Metric{Name: "cycles_per_s", Unit: "cycles/s", Better: labresult.Higher,
		Doc: "get-ack cycles per second: a batch received by a member, then acked"}
	received = labresult.Metric{Name: "received", Better: labresult.Neither,
		Doc: "messages the consumer groups received"}
	e2eP50MS = labresult.Metric{Name: "e2e_p50_ms", Unit: "ms", Better: labresult.Lower,
		Doc: "end-to-end latency, a message sent by a publisher to received by a consumer: median"}
	e2eP99MS = labresult.Metric{Name: "e2e_p99_ms", Unit: "ms", Better: labresult.Lower,
		Doc: "end-to-end latency, sent to received: 99th percentile"}
	e2eP999MS = labresult.Metric{Name: "e2e_p999_ms", Unit: "ms", Better: labresult.Lower,
		Doc: "end-to-end latency, sent to received: 99.9th percentile"}
	kafkaProducePerS = labresult.Metric{Name: "kafka_produce_requests_per_s", Unit: "req/s", Better: labresult.Neither,
		Doc: "Produce requests the gateway sent Kafka per second of the window: the load on Kafka"}
	kafkaProducePerMsg = labresult.Metric{Name: "kafka_produce_requests_per_msg", Better: labresult.Lower,
		Doc: "Produce requests the gateway sent Kafka per message acked: what aggregation cuts"}
	kafkaBytesPerMsg = labresult.Metric{Name: "kafka_bytes_per_msg", Unit: "B", Better: labresult.Lower,
		Doc: "record bytes the gateway wrote to Kafka per message acked, as sent (compressed); record batch headers not counted"}
	kafkaRawBytesPerMsg = labresult.Metric{Name: "kafka_raw_bytes_per_msg", Unit: "B", Better: labresult.Neither,
		Doc: "the same records' bytes before compression: a 100-byte value, the checker's 28-byte header, record framing"}
	compressionRatio = labresult.Metric{Name: "compression_ratio", Better: labresult.Lower,
		Doc: "record bytes to Kafka compressed over uncompressed (1: nothing saved; franz-go sends a batch its codec does not shrink uncompressed)"}
	gatewayCPUPerMsg = labresult.Metric{Name: "gateway_cpu_us_per_msg", Unit: "µs", Better: labresult.Lower,
		Doc: "the gateway's CPU per message acked, from its cgroup over each run's window"}
)

// Figures the experiment derives or measures beside the driver.
var (
	roundTripsPerCPU = labresult.Metric{Name: "round_trips_per_gateway_cpu_s", Unit: "round trips/CPU-s", Better: labresult.Higher,
		Doc: "echo round trips per second of gateway CPU: the row's rps over the cores its gateway used"}
	ratioToReportPerCore = labresult.Metric{Name: "ratio_to_report_per_core", Unit: "x", Better: labresult.Higher,
		Doc: "the row's msgs/s at 1 CPU over the report's msgs/s per core (its figure over its 4 cores)"}
	checkerCPU = labresult.Metric{Name: "checker_cpu_cores", Unit: "cores", Better: labresult.Neither,
		Doc: "CPU of the lab's process, where the checker runs, over the window"}
	producerCPU = labresult.Metric{Name: "producer_cpu_cores", Unit: "cores", Better: labresult.Neither,
		Doc: "CPU of the direct producer's process over its window"}
	producerCPUPerMsg = labresult.Metric{Name: "producer_cpu_us_per_msg", Unit: "µs", Better: labresult.Lower,
		Doc: "the direct producer's CPU per message acked, from its process over each run's window"}
	msgsPerGatewayCPU = labresult.Metric{Name: "msgs_per_gateway_cpu_s", Unit: "msg/CPU-s", Better: labresult.Higher,
		Doc: "messages per second of gateway CPU (subscribe: per drain, then the median)"}
	recordsPerCPU = labresult.Metric{Name: "records_per_cpu_s", Unit: "records/CPU-s", Better: labresult.Higher,
		Doc: "kafka-producer-perf-test's records per second of its JVM's CPU, the JVM's start included"}
	perfCPU = labresult.Metric{Name: "cpu_s", Unit: "CPU-s", Better: labresult.Neither,
		Doc: "CPU time of the perf test's JVM, start to exit"}
	perfStartupCPU = labresult.Metric{Name: "startup_cpu_s", Unit: "CPU-s", Better: labresult.Neither,
		Doc: "CPU time of a 1,000-record perf test: the JVM's start and connection"}
	recordsPerCPURunning = labresult.Metric{Name: "records_per_cpu_s_running", Unit: "records/CPU-s", Better: labresult.Higher,
		Doc: "kafka-producer-perf-test's records per second of its JVM's CPU, less the start (startup_cpu_s)"}
	cyclesPerGatewayCPU = labresult.Metric{Name: "cycles_per_gateway_cpu_s", Unit: "cycles/CPU-s", Better: labresult.Higher,
		Doc: "get-ack cycles per second of gateway CPU, per drain, then the median"}
	gatewayCores = labresult.Metric{Name: "gateway_cores", Unit: "cores", Better: labresult.Neither,
		Doc: "the cores the gateway used over the drains"}
	rssIdleMB = labresult.Metric{Name: "rss_idle_mb", Unit: "MB", Better: labresult.Lower,
		Doc: "the gateway's RSS before its first drain"}
	rssMBPerGroup = labresult.Metric{Name: "rss_mb_per_group", Unit: "MB", Better: labresult.Lower,
		Doc: "the gateway's peak RSS over the drains less its idle RSS, per consumer group"}
	kafkaDials = labresult.Metric{Name: "kafka_connections_dialed", Better: labresult.Lower,
		Doc: "Kafka connections the gateway dialed over the runs (ApiVersions requests: franz-go sends one first on each)"}
	rssKBPerStream = labresult.Metric{Name: "rss_kb_per_stream", Unit: "KB", Better: labresult.Lower,
		Doc: "the gateway's RSS growth per idle stream"}
	rssBeforeMB = labresult.Metric{Name: "rss_before_mb", Unit: "MB", Better: labresult.Neither,
		Doc: "the gateway's RSS before the idle streams opened"}
	streams = labresult.Metric{Name: "streams", Better: labresult.Neither,
		Doc: "idle streams held open"}
	openS = labresult.Metric{Name: "open_s", Unit: "s", Better: labresult.Lower,
		Doc: "time to open the idle streams"}
	faultsInjected = labresult.Metric{Name: "faults", Better: labresult.Neither,
		Doc: "faults injected during the row"}
	drainS = labresult.Metric{Name: "drain_s", Unit: "s", Better: labresult.Lower,
		Doc: "time from the end of publishing until every group had every acked message"}
)

// metrics lists every figure of the experiment's own, for its Spec.
func metrics() []labresult.Metric {
	return []labresult.Metric{
		batchesPerS, duplicates, receivedPerS, cyclesPerS, received, e2eP50MS, e2eP99MS, e2eP999MS,
		kafkaProducePerS, kafkaProducePerMsg, kafkaBytesPerMsg, kafkaRawBytesPerMsg, compressionRatio, gatewayCPUPerMsg,
		roundTripsPerCPU, ratioToReportPerCore, checkerCPU, producerCPU, producerCPUPerMsg, msgsPerGatewayCPU,
		recordsPerCPU, perfCPU, perfStartupCPU, recordsPerCPURunning, cyclesPerGatewayCPU, gatewayCores,
		rssIdleMB, rssMBPerGroup, kafkaDials, rssKBPerStream, rssBeforeMB, streams, openS, faultsInjected, drainS,
		recordsPerProduce,
		consumerCPU, consumerCPUPerMsg,
		rssKBOverFloor,
		replayExtra, // replay.go
	}
}
