package checker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
)

// inflightCounter is a stream interceptor that counts, at the gateway,
// each publish stream's requests received and not yet answered, and
// keeps the most any stream had at once.
type inflightCounter struct {
	mu       sync.Mutex
	most     int64
	requests int64
}

func (c *inflightCounter) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &countingStream{ServerStream: ss, c: c})
}

type countingStream struct {
	grpc.ServerStream
	c           *inflightCounter
	outstanding atomic.Int64
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if _, ok := m.(*databusv1.PublishRequest); ok && err == nil {
		n := s.outstanding.Add(1)
		s.c.mu.Lock()
		s.c.requests++
		s.c.most = max(s.c.most, n)
		s.c.mu.Unlock()
	}
	return err
}

func (s *countingStream) SendMsg(m any) error {
	if _, ok := m.(*databusv1.PublishResponse); ok {
		// Counted off before it leaves: a client that awaits each answer
		// may send its next request as soon as this one reaches it, and
		// the gateway may read that before SendMsg returns.
		s.outstanding.Add(-1)
	}
	return s.ServerStream.SendMsg(m)
}

func (c *inflightCounter) read() (most, requests int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.most, c.requests
}

// TestOneInFlightPerStream: with Inflight 1, the report's checker loop
// (send a request, await its answer, repeat) that the lab's claims run,
// no stream ever has a second request at the gateway before its first is
// answered, with aggregation off and on. With more in flight the same
// count passes one, so it can tell the two apart.
func TestOneInFlightPerStream(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	for _, tt := range []struct {
		name     string
		inflight int
		agg      bool
	}{
		{"one in flight", 1, false},
		{"one in flight, aggregation", 1, true},
		{"pipelined", 8, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &inflightCounter{}
			addr := startGateway(t, gateway.Config{Brokers: k.Brokers}, grpc.StreamInterceptor(c.intercept))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const streams = 20
			res, err := checker.Run(ctx, checker.Config{
				Target: addr, Topic: newTopic(t, k), Scenario: checker.Throughput, Streams: streams, Batch: 1,
				Inflight: tt.inflight, Aggregation: tt.agg, Warmup: 100 * time.Millisecond, Duration: time.Second,
			}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			most, requests := c.read()
			t.Logf("%d requests at the gateway, at most %d in flight on a stream; %.0f msgs/s", requests, most, res.MsgsPerSec)
			switch {
			case !res.OK() || len(res.Errors) > 0:
				t.Fatalf("the run failed: errors %v", res.Errors)
			case res.Inflight != tt.inflight:
				t.Fatalf("the result says %d in flight, want %d", res.Inflight, tt.inflight)
			case requests < 5*streams: // a few loops per stream at least
				t.Fatalf("only %d requests reached the gateway: too few to tell", requests)
			case tt.inflight == 1 && most != 1:
				t.Fatalf("a stream had %d requests in flight at the gateway, want 1: the checker did not await each answer", most)
			case tt.inflight > 1 && most < 2:
				t.Fatalf("at most %d request in flight on a stream with %d allowed: the count cannot tell pipelining from the report's loop", most, tt.inflight)
			}
		})
	}
}
