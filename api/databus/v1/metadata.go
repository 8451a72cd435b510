package databusv1

// Metadata keys a client sets once, when it opens a stream (see
// databus.proto). Both the gateway and the client use these names.
const (
	MDTopic       = "x-databus-topic"
	MDGroup       = "x-databus-group"
	MDAggregation = "x-databus-aggregation"
	MDMaxInflight = "x-databus-max-inflight"
	MDMaxUnacked  = "x-databus-max-unacked"
	MDBatchSize   = "x-databus-batch-size"
	// MDCompression asks, on a publish stream, for the codec Kafka's
	// record batches of this stream are compressed with: one of
	// Compressions. Without it the gateway's default applies; a codec the
	// gateway does not allow is refused with InvalidArgument.
	MDCompression = "x-databus-compression"
	// MDMaxDeliveries, on a subscribe stream, dead-letters a message
	// nacked when its delivery count has reached it (see databus.proto).
	MDMaxDeliveries = "x-databus-max-deliveries"
	// MDDeadLetterTopic names the dead-letter topic; default the topic
	// and DeadLetterSuffix.
	MDDeadLetterTopic = "x-databus-dead-letter-topic"
	// MDStartTime and MDStartOffsets make a subscribe stream a replay,
	// from a time or from offsets, outside any group; MDReplayEnd "now"
	// ends it at the end offsets the topic had when it opened.
	MDStartTime    = "x-databus-start-time"
	MDStartOffsets = "x-databus-start-offsets"
	MDReplayEnd    = "x-databus-replay-end"
)

// DeadLetterSuffix makes a topic's default dead-letter topic's name.
const DeadLetterSuffix = ".dlq"

// The headers a dead letter carries besides the original message's own
// (see databus.proto).
const (
	HeaderOriginalTopic     = "databus-original-topic"
	HeaderOriginalPartition = "databus-original-partition"
	HeaderOriginalOffset    = "databus-original-offset"
	HeaderDeliveryCount     = "databus-delivery-count"
	HeaderNackReason        = "databus-nack-reason"
	HeaderConsumerGroup     = "databus-consumer-group"
)

// Compressions are the values of MDCompression: Kafka's record batch
// codecs.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}
