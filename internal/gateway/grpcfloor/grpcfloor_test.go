package grpcfloor_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/gateway/grpcfloor"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestFloorServes: the floor answers each publish batch with its id and
// message count, as the gateway's --echo does, refuses Subscribe with
// Unimplemented, and serves the process's RSS on /metrics, which the
// checker's --gateway-metrics reads for the idle rows.
func TestFloorServes(t *testing.T) {
	grpcAddr := testkit.FreeAddr(t)
	ln := testkit.Listen(t)
	testkit.Background(t, "grpcfloor.Serve", func(ctx context.Context) error {
		return grpcfloor.Serve(ctx, server.Config{Listener: ln}, grpcfloor.Config{GRPCAddr: grpcAddr, GOMAXPROCS: 1})
	})
	base := "http://" + ln.Addr().String()
	testkit.Healthy(t, 10*time.Second, base+"/healthz")

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := databusv1.NewDataBusClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := client.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		req := &databusv1.PublishRequest{BatchId: id}
		for range id {
			req.Messages = append(req.Messages, &databusv1.Message{Value: []byte("v")})
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.BatchId != id || resp.Stored != uint32(id) {
			t.Fatalf("batch %d of %d messages answered as batch %d, %d stored", id, id, resp.BatchId, resp.Stored)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}

	sub, err := client.Subscribe(ctx)
	if err == nil {
		_, err = sub.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Subscribe: %v, want Unimplemented", err)
	}

	if m := testkit.Scrape(t, base+"/metrics"); m["process_resident_memory_bytes"] == nil {
		t.Error("/metrics has no process_resident_memory_bytes: the idle rows read the floor's RSS from it")
	}
}
