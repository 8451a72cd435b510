package gateway

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// ServerOptions bound a gRPC server's per-connection memory, and say how
// it authenticates clients.
type ServerOptions struct {
	// BufferBytes is each connection's read and write buffer (32 KiB, the
	// report's choice: gRPC's defaults cost too much at 10k connections).
	BufferBytes int
	// WindowBytes is the HTTP/2 flow-control window per stream and per
	// connection (64 KiB).
	WindowBytes int32
	// MaxRecvBytes bounds one incoming batch (16 MiB).
	MaxRecvBytes int
	// Auth is TLS, mutual TLS and/or bearer tokens (auth.go); nil serves
	// plaintext to anyone.
	Auth *Auth
}

// NewServer returns a gRPC server serving g, the standard health service,
// whose status follows g.Ready every few seconds until ctx ends, and gRPC
// server reflection, so that grpcurl and the like need no .proto file.
func NewServer(ctx context.Context, g *Gateway, o ServerOptions) *grpc.Server {
	srv := grpc.NewServer(append(o.Auth.serverOptions(g.cfg.Registry, g.log),
		TransportOptions(o, g.cfg.MaxStreamsPerConnection)...)...)
	databusv1.RegisterDataBusServer(srv, g)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	go func() {
		t := time.NewTicker(3 * time.Second)
		defer t.Stop()
		for {
			st := healthpb.HealthCheckResponse_SERVING
			if g.Ready(ctx) != nil {
				st = healthpb.HealthCheckResponse_NOT_SERVING
			}
			hs.SetServingStatus("", st)
			hs.SetServingStatus(databusv1.DataBus_ServiceDesc.ServiceName, st)
			select {
			case <-ctx.Done():
				hs.Shutdown()
				return
			case <-t.C:
			}
		}
	}()
	return srv
}

// TransportOptions are the gateway's gRPC transport settings (codec,
// buffers, flow-control windows, message size, keepalive) for o, with at most
// maxStreamsPerConn streams per connection; bench/grpcfloor serves with
// them too, so that its floor is the gateway's transport and nothing else.
func TransportOptions(o ServerOptions, maxStreamsPerConn int) []grpc.ServerOption {
	if o.BufferBytes == 0 {
		o.BufferBytes = 32 << 10
	}
	if o.WindowBytes == 0 {
		o.WindowBytes = 64 << 10
	}
	if o.MaxRecvBytes == 0 {
		o.MaxRecvBytes = 16 << 20
	}
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()),
		grpc.ReadBufferSize(o.BufferBytes),
		grpc.WriteBufferSize(o.BufferBytes),
		grpc.SharedWriteBuffer(true), // idle connections hold no write buffer
		grpc.InitialWindowSize(o.WindowBytes),
		grpc.InitialConnWindowSize(o.WindowBytes),
		grpc.MaxRecvMsgSize(o.MaxRecvBytes),
		grpc.MaxConcurrentStreams(uint32(maxStreamsPerConn)),
		// Ping idle clients so dead connections are found and their
		// subscriptions' partitions freed; never close a healthy idle
		// stream (the report saw idle timeouts cause latency spikes).
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}
