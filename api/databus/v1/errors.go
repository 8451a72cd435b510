package databusv1

import (
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The gateway attaches a google.rpc.ErrorInfo to some of the statuses it
// ends streams with, so that a client can tell them apart without
// reading the message: a code alone is not enough (ResourceExhausted
// also means "the gateway is full, retry later").
const (
	// ErrorDomain is ErrorInfo.Domain on every such status.
	ErrorDomain = "databus.hlab"
	// ReasonBatchRefused: the gateway refused one publish batch (larger
	// than it accepts) and ended the stream before reading more. Resending
	// that batch fails again; the batches after it were not read and may
	// be resent on a new stream. ErrorInfo.Metadata["batch_id"] is the
	// refused batch's id when the gateway could read it (a batch over the
	// gRPC receive limit is refused before it is decoded: then it is the
	// first batch not yet answered).
	ReasonBatchRefused = "BATCH_REFUSED"
	// ReasonStreamMoved: the gateway ended the stream in good order so
	// that the client reconnects, on a new connection that its load
	// balancer may send to another gateway: every publish batch it read
	// was answered, and a subscribe stream's acked offsets were
	// committed. The client reconnects at once, without backoff.
	ReasonStreamMoved = "STREAM_MOVED"
)

// BatchRefused returns a status of code with msg and an ErrorInfo of
// ReasonBatchRefused (and batchID, when not 0).
func BatchRefused(code codes.Code, batchID uint64, msg string) error {
	info := &errdetails.ErrorInfo{Reason: ReasonBatchRefused, Domain: ErrorDomain}
	if batchID != 0 {
		info.Metadata = map[string]string{"batch_id": strconv.FormatUint(batchID, 10)}
	}
	return withInfo(status.New(code, msg), info)
}

// StreamMoved returns an Unavailable status with msg and an ErrorInfo of
// ReasonStreamMoved.
func StreamMoved(msg string) error {
	return withInfo(status.New(codes.Unavailable, msg), &errdetails.ErrorInfo{Reason: ReasonStreamMoved, Domain: ErrorDomain})
}

func withInfo(st *status.Status, info *errdetails.ErrorInfo) error {
	if d, err := st.WithDetails(info); err == nil {
		st = d
	}
	return st.Err()
}

// Reason returns the reason of the databus ErrorInfo attached to err's
// status, or "".
func Reason(err error) (reason string, metadata map[string]string) {
	st, ok := status.FromError(err)
	if !ok {
		return "", nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			return info.Reason, info.Metadata
		}
	}
	return "", nil
}
