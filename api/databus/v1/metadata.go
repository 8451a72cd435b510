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
)
