package databus_test

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/testkit"
)

// fakeGateway is a DataBus server that records what subscribers send:
// their streams' metadata and requests. Each subscribe stream is sent the
// batches given to deliver, and ends when the client half-closes it,
// unless hang is set.
type fakeGateway struct {
	databusv1.UnimplementedDataBusServer
	addr  string
	batch chan *databusv1.SubscribeResponse
	hang  atomic.Bool

	mu       sync.Mutex
	streams  []metadata.MD
	requests []*databusv1.SubscribeRequest
}

func startFakeGateway(t *testing.T) *fakeGateway {
	t.Helper()
	f := &fakeGateway{batch: make(chan *databusv1.SubscribeResponse, 16)}
	ln := testkit.Listen(t)
	f.addr = ln.Addr().String()
	srv := grpc.NewServer()
	databusv1.RegisterDataBusServer(srv, f)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return f
}

// fakeClient is a fake gateway, a client of it and a context for the
// test's calls.
func fakeClient(t *testing.T) (*fakeGateway, *databus.Client, context.Context) {
	t.Helper()
	f := startFakeGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return f, dial(t, f.addr), ctx
}

func (f *fakeGateway) Subscribe(stream databusv1.DataBus_SubscribeServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	f.record(func() { f.streams = append(f.streams, md) })
	recvEnd := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvEnd <- err
				return
			}
			f.record(func() { f.requests = append(f.requests, req) })
		}
	}()
	for {
		select {
		case b := <-f.batch:
			if err := stream.Send(b); err != nil {
				return err
			}
		case err := <-recvEnd:
			if err != io.EOF || f.hang.Load() {
				<-stream.Context().Done()
			}
			return nil
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (f *fakeGateway) record(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

// deliver sends a batch of these messages to the next stream that reads.
func (f *fakeGateway) deliver(ms ...*databusv1.ConsumedMessage) {
	f.batch <- &databusv1.SubscribeResponse{Messages: ms}
}

func (f *fakeGateway) streamCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.streams)
}

func (f *fakeGateway) stream(i int) metadata.MD {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams[i]
}

// request waits for the client's i-th request.
func (f *fakeGateway) request(t *testing.T, i int) *databusv1.SubscribeRequest {
	t.Helper()
	var req *databusv1.SubscribeRequest
	testkit.Eventually(t, 30*time.Second, "the client's request", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.requests) > i {
			req = f.requests[i]
		}
		return req != nil
	})
	return req
}
