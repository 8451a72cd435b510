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
)

// Compressions are the values of MDCompression: Kafka's record batch
// codecs.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}
