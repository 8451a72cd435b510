package gateway_test

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/grpcfloor"
	"github.com/highload-lab/hlab/internal/testkit"
)

// idleStreams opens n publish streams to addr on one connection, each
// sending one batch and reading its answer, then idle; they end with
// the test.
func idleStreams(t *testing.T, addr string, n int) []databusv1.DataBus_PublishClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), gateway.MDTopic, "idle"))
	t.Cleanup(cancel)
	var out []databusv1.DataBus_PublishClient
	for i := range n {
		s, err := databusv1.NewDataBusClient(conn).Publish(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&databusv1.PublishRequest{BatchId: uint64(i), Messages: []*databusv1.Message{{Value: []byte("v")}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// goroutinesPerStream is how many goroutines n idle streams opened to
// addr add to the process (client and server), per stream, once the
// count settles.
func goroutinesPerStream(t *testing.T, addr string, n int) float64 {
	t.Helper()
	before := settledGoroutines(t)
	idleStreams(t, addr, n)
	return float64(settledGoroutines(t)-before) / float64(n)
}

// settledGoroutines is the process's goroutine count once two reads 100
// ms apart agree.
func settledGoroutines(t *testing.T) int {
	t.Helper()
	last := runtime.NumGoroutine()
	var got int
	testkit.Eventually(t, 30*time.Second, "the goroutine count to settle", func() bool {
		time.Sleep(100 * time.Millisecond)
		got = runtime.NumGoroutine()
		same := got == last
		last = got
		return same
	})
	return got
}

// TestIdlePublishStreamIsOneGoroutine: an idle publish stream costs the
// gateway what it costs a bare grpc-go server of the same API (the
// floor, grpcfloor): its handler's goroutine, blocked in Recv, and no
// second one. The gateway used to keep a goroutine per stream in Recv
// beside the handler's, so that a drain could end a stream whose client
// sends nothing: 4 KB of stack per idle stream above the floor.
func TestIdlePublishStreamIsOneGoroutine(t *testing.T) {
	const n = 200
	floor := grpcfloor.NewServer()
	ln := testkit.Listen(t)
	go floor.Serve(ln)
	t.Cleanup(floor.Stop)
	w := startGateway(t, gateway.Config{Echo: true})
	floorPer := goroutinesPerStream(t, ln.Addr().String(), n)
	gwPer := goroutinesPerStream(t, w.addr, n)
	t.Logf("goroutines per idle stream, client and server: floor %.2f, gateway %.2f", floorPer, gwPer)
	if gwPer-floorPer > 0.5 {
		t.Errorf("an idle publish stream costs %.2f goroutines more on the gateway than on a bare grpc-go server: want none", gwPer-floorPer)
	}
}

// TestIdlePublishStreamEndsOnStop: publish streams whose client sends
// nothing, their handlers blocked in Recv, still end in good order when
// the gateway stops (told to go away: STREAM_MOVED), when their
// connection reaches its maximum age (the GOAWAY alone: STREAM_MOVED)
// and when the gateway drains without a GOAWAY (ErrDraining), and the
// gateway's stop or drain returns before its deadline.
func TestIdlePublishStreamEndsOnStop(t *testing.T) {
	for _, how := range []string{"stop", "age", "drain"} {
		t.Run(how, func(t *testing.T) {
			g, err := gateway.New(gateway.Config{Echo: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			so := gateway.ServerOptions{}
			if how == "age" {
				so.MaxConnectionAge, so.MaxConnectionAgeGrace = time.Second, time.Minute
			}
			srv := gateway.NewServer(context.Background(), g, so)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			defer srv.Stop()
			streams := idleStreams(t, ln.Addr().String(), 20)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stopped := make(chan error, 1)
			go func() {
				switch how {
				case "stop":
					stopped <- gateway.Stop(ctx, srv, g)
				case "age":
					stopped <- nil // the streams end with the GOAWAY alone
				default:
					stopped <- g.Drain(ctx)
				}
			}()
			for i, s := range streams {
				_, err := s.Recv()
				st := status.Convert(err)
				if st.Code() != codes.Unavailable {
					t.Fatalf("stream %d ended with %v, want Unavailable", i, err)
				}
				moved := false
				for _, d := range st.Details() {
					if info, ok := d.(interface{ GetReason() string }); ok && info.GetReason() == "STREAM_MOVED" {
						moved = true
					}
				}
				if how != "drain" && !moved {
					t.Fatalf("stream %d ended with %v, want STREAM_MOVED: the gateway told its client to go away", i, err)
				}
				if how == "drain" && !strings.Contains(st.Message(), gateway.ErrDraining.Error()) {
					t.Fatalf("stream %d ended with %v, want the drain's message", i, err)
				}
			}
			if err := <-stopped; err != nil {
				t.Fatalf("%s: %v: the idle streams did not end before the deadline", how, err)
			}
		})
	}
}
