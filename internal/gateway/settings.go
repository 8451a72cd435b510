package gateway

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// The metadata keys of api/databus/v1.
const (
	MDTopic       = databusv1.MDTopic
	MDGroup       = databusv1.MDGroup
	MDAggregation = databusv1.MDAggregation
	MDMaxInflight = databusv1.MDMaxInflight
	MDMaxUnacked  = databusv1.MDMaxUnacked
	MDBatchSize   = databusv1.MDBatchSize
	MDCompression = databusv1.MDCompression
)

// streamSettings are a stream's settings, from its metadata.
type streamSettings struct {
	topic       string
	group       string
	aggregation bool
	maxInflight int
	maxUnacked  int
	batchSize   int
	compression string // the codec of the stream's batches in Kafka (publish)
	// Dead letters (subscribe): a message nacked at its maxDeliveries-th
	// delivery goes to deadLetterTopic; 0: none is dead-lettered.
	maxDeliveries   int
	deadLetterTopic string
}

// settingsFrom reads and validates a stream's metadata. Every error is an
// InvalidArgument status that names the key and says what to send.
func (g *Gateway) settingsFrom(ctx context.Context, subscribe bool) (streamSettings, error) {
	// One key at a time: metadata.FromIncomingContext copies the whole
	// metadata (1.3 KB per stream opened, garbage at once).
	get := func(key string) string {
		if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	s := streamSettings{
		topic:       get(MDTopic),
		group:       get(MDGroup),
		maxInflight: g.cfg.MaxInflight,
		maxUnacked:  g.cfg.MaxUnacked,
		batchSize:   g.cfg.BatchSize,
	}
	if s.topic == "" {
		return s, status.Errorf(codes.InvalidArgument, "databus: metadata %q is required: set it to the Kafka topic when opening the stream", MDTopic)
	}
	if !validName(s.topic) {
		return s, status.Errorf(codes.InvalidArgument, "databus: topic %q is not a valid Kafka topic name (1-249 of [a-zA-Z0-9._-])", s.topic)
	}
	if subscribe && s.group == "" {
		return s, status.Errorf(codes.InvalidArgument, "databus: metadata %q is required to subscribe: set it to your consumer group's name", MDGroup)
	}
	switch v := strings.ToLower(get(MDAggregation)); v {
	case "", "off", "false", "0":
	case "on", "true", "1":
		s.aggregation = true
	default:
		return s, status.Errorf(codes.InvalidArgument, "databus: metadata %q is %q: use on or off", MDAggregation, v)
	}
	if !subscribe {
		codec, err := g.compressionFrom(get(MDCompression))
		if err != nil {
			return s, err
		}
		s.compression = codec
	}
	for _, f := range []struct {
		key      string
		dst      *int
		max      int
		relevant bool
	}{
		{MDMaxInflight, &s.maxInflight, 1024, !subscribe},
		{MDMaxUnacked, &s.maxUnacked, 100000, subscribe},
		{MDBatchSize, &s.batchSize, 10000, subscribe},
	} {
		v := get(f.key)
		if v == "" || !f.relevant {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > f.max {
			return s, status.Errorf(codes.InvalidArgument, "databus: metadata %q is %q: give a whole number from 1 to %d", f.key, v, f.max)
		}
		*f.dst = n
	}
	if subscribe {
		if err := g.deadLetterSettings(&s, get); err != nil {
			return s, err
		}
	}
	return s, nil
}

// deadLetterSettings reads x-databus-max-deliveries and
// x-databus-dead-letter-topic into s.
func (g *Gateway) deadLetterSettings(s *streamSettings, get func(string) string) error {
	topic := get(databusv1.MDDeadLetterTopic)
	v := get(databusv1.MDMaxDeliveries)
	if v == "" {
		if topic != "" {
			return status.Errorf(codes.InvalidArgument, "databus: metadata %q needs %q: give the deliveries after which a nacked message goes to that topic", databusv1.MDDeadLetterTopic, databusv1.MDMaxDeliveries)
		}
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > g.cfg.MaxDeliveries {
		return status.Errorf(codes.InvalidArgument, "databus: metadata %q is %q: give a whole number from 1 to %d (the gateway's --max-deliveries)", databusv1.MDMaxDeliveries, v, g.cfg.MaxDeliveries)
	}
	if topic == "" {
		topic = s.topic + databusv1.DeadLetterSuffix
	}
	if !validName(topic) || topic == s.topic {
		return status.Errorf(codes.InvalidArgument, "databus: metadata %q is %q: give a valid Kafka topic name (1-249 of [a-zA-Z0-9._-]) other than the stream's topic", databusv1.MDDeadLetterTopic, topic)
	}
	s.maxDeliveries, s.deadLetterTopic = n, topic
	return nil
}

func validName(t string) bool {
	if len(t) == 0 || len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// streamError formats a status for a stream that cannot go on.
func streamError(code codes.Code, format string, args ...any) error {
	return status.Error(code, fmt.Sprintf("databus: "+format, args...))
}

// refusedBatch formats the status that ends a publish stream at a batch
// the gateway will not take however often it is sent (too large): its
// ErrorInfo tells the client to fail that batch for good and resend the
// others, which a code alone cannot (ResourceExhausted is also "retry").
func refusedBatch(id uint64, code codes.Code, format string, args ...any) error {
	return databusv1.BatchRefused(code, id, fmt.Sprintf("databus: "+format, args...))
}
