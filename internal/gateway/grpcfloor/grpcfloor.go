// Package grpcfloor is the least a grpc-go server of the databus API can
// be: Publish answered by a bare Recv/Send loop on the stream's handler
// goroutine, with the gateway's own transport settings
// (gateway.TransportOptions), no limits, no metrics of its own, no drain.
// The lab and bench/databus.sh run it (hlab serve grpcfloor) in the
// gateway's place, on the same cores: what the gateway costs beyond it,
// per round trip and per idle stream, is the gateway's own work; what it
// costs is grpc-go's and the kernel's on that machine, the floor the
// gateway can reach while it keeps grpc-go.
//
// Its HTTP address serves what every hlab service does (internal/server):
// /healthz, and /metrics with the Go and process collectors
// (process_resident_memory_bytes, which the checker's --gateway-metrics
// reads), and Go's profiles on --admin-addr.
package grpcfloor

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/server"
)

// Config is what a floor process takes beyond its HTTP server's flags.
// The zero value serves gRPC on gateway.DefaultGRPCAddr with Go's own
// GOMAXPROCS.
type Config struct {
	// GRPCAddr is where clients connect (default gateway.DefaultGRPCAddr).
	GRPCAddr string
	// GOMAXPROCS, when positive, sets the process's GOMAXPROCS, as the
	// gateway's --gomaxprocs does, so that both run alike under a quota.
	GOMAXPROCS int
}

// RegisterFlags adds the floor's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.GRPCAddr, "grpc-addr", gateway.DefaultGRPCAddr, "gRPC address clients connect to")
	fs.Var(cliflag.AtLeast(&c.GOMAXPROCS, 1), "gomaxprocs", "Go's GOMAXPROCS for the process (default: Go's own, from the CPUs and the CPU quota); give the gateway's to compare with it")
}

// Args returns the command line that makes a floor process run c.
func (c Config) Args() []string { return cliflag.Args(c) }

// NewServer returns a gRPC server of the databus API with the gateway's
// transport settings, Publish echoing each batch and Subscribe refused.
func NewServer() *grpc.Server {
	srv := grpc.NewServer(gateway.TransportOptions(gateway.ServerOptions{}, gateway.DefaultMaxStreamsPerConnection)...)
	databusv1.RegisterDataBusServer(srv, echo{})
	return srv
}

// Serve runs a floor process, its HTTP endpoints on hs, until ctx ends;
// then it stops at once: the floor has no drain to measure.
func Serve(ctx context.Context, hs server.Config, c Config) error {
	logger := cmp.Or(hs.Logger, slog.Default())
	if c.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(c.GOMAXPROCS)
	}
	addr := cmp.Or(c.GRPCAddr, gateway.DefaultGRPCAddr)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("grpcfloor: cannot listen on %s (is the port taken? pass another --grpc-addr): %w", addr, err)
	}
	srv := NewServer()
	grpcErr := make(chan error, 1)
	go func() { grpcErr <- srv.Serve(ln) }()
	logger.Info("gRPC floor serving the databus API's Publish as a bare echo", "addr", ln.Addr().String(), "gomaxprocs", runtime.GOMAXPROCS(0))

	hs.Name = cmp.Or(hs.Name, "grpcfloor")
	httpErr := make(chan error, 1)
	go func() { httpErr <- server.Run(ctx, hs, http.NotFoundHandler()) }()
	select {
	case err := <-grpcErr:
		return fmt.Errorf("grpcfloor: gRPC server stopped: %w", err)
	case err := <-httpErr:
		srv.Stop()
		return err
	case <-ctx.Done():
	}
	srv.Stop()
	if err := <-httpErr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// echo answers every publish batch at once, as the gateway's --echo does,
// on the stream's own handler goroutine: one goroutine per stream, the
// least grpc-go allows.
type echo struct {
	databusv1.UnimplementedDataBusServer
}

func (echo) Publish(stream databusv1.DataBus_PublishServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&databusv1.PublishResponse{BatchId: req.BatchId, Stored: uint32(len(req.Messages))}); err != nil {
			return err
		}
	}
}

func (echo) Subscribe(databusv1.DataBus_SubscribeServer) error {
	return status.Error(codes.Unimplemented, "grpcfloor serves Publish only: it is the floor of the gateway's echo and idle-stream figures; subscribe through hlab serve databus")
}
