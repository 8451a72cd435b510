package gateway

import (
	"cmp"
	"context"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Bounds on what a client can make the server hold before its token is
// checked.
const (
	maxHeaderListBytes = 64 << 10         // a stream's metadata, decoded
	handshakeTimeout   = 10 * time.Second // TLS and the HTTP/2 preface
)

// ServerOptions bound a gRPC server's per-connection memory, and say how
// it authenticates clients.
type ServerOptions struct {
	// BufferBytes is each connection's read and write buffer (32 KiB, the
	// report's choice: gRPC's defaults cost too much at 10k connections).
	BufferBytes int
	// WindowBytes is the HTTP/2 flow-control window per stream and per
	// connection (64 KiB, also the least: below it gRPC sizes windows
	// itself, which the receive budget, recvgate.go, does not follow).
	WindowBytes int32
	// MaxRecvBytes bounds one incoming message: gRPC refuses a longer
	// one before reading it. Default in NewServer: the gateway's
	// MaxStreamBytes (a batch larger cannot be accepted anyway) plus an
	// eighth and 64 KiB for protobuf's framing; in TransportOptions alone,
	// 16 MiB.
	MaxRecvBytes int
	// Auth is TLS, mutual TLS and/or bearer tokens (auth.go); nil serves
	// plaintext to anyone.
	Auth *Auth
	// MaxConnectionAge is how old a client connection gets before gRPC
	// sends it a GOAWAY (with gRPC's jitter of ±10%) and the gateway
	// ends its streams in good order, so that they reconnect through the
	// load balancer (moving.go). Default DefaultMaxConnectionAge;
	// negative: never.
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace is how long after that GOAWAY the connection
	// is closed whatever its streams do. Default
	// DefaultMaxConnectionAgeGrace; negative: never.
	MaxConnectionAgeGrace time.Duration
}

func (o *ServerOptions) setDefaults() {
	o.BufferBytes = cmp.Or(o.BufferBytes, 32<<10)
	o.WindowBytes = max(o.WindowBytes, 64<<10)
	o.MaxRecvBytes = cmp.Or(o.MaxRecvBytes, 16<<20)
	o.MaxConnectionAge = cmp.Or(o.MaxConnectionAge, DefaultMaxConnectionAge)
	o.MaxConnectionAgeGrace = cmp.Or(o.MaxConnectionAgeGrace, DefaultMaxConnectionAgeGrace)
}

// forever turns a negative duration (never) into gRPC's zero (infinity).
func forever(d time.Duration) time.Duration { return max(d, 0) }

// NewServer returns a gRPC server serving g, the standard health service,
// whose status follows g.Ready every few seconds until ctx ends, and gRPC
// server reflection, so that grpcurl and the like need no .proto file.
// The messages clients send count against g's bytes budget before they
// arrive (recvgate.go).
func NewServer(ctx context.Context, g *Gateway, o ServerOptions) *grpc.Server {
	if o.MaxRecvBytes == 0 {
		o.MaxRecvBytes = int(min(g.cfg.MaxStreamBytes+g.cfg.MaxStreamBytes/8+64<<10, math.MaxInt32))
	}
	o.setDefaults()
	gate := newRecvGate(&g.bytes, o.WindowBytes, g.cfg.Registry, g.log)
	go gate.run(ctx)
	g.gatesMu.Lock()
	g.gates = append(g.gates, gate)
	g.gatesMu.Unlock()
	opts := append(o.Auth.serverOptions(g.cfg.Registry, g.log), TransportOptions(o, g.cfg.MaxStreamsPerConnection)...)
	opts = append(opts,
		grpc.Creds(gateCreds{o.Auth.creds(), gate}),
		grpc.StatsHandler(gateStats{gate}),
		grpc.ChainStreamInterceptor(g.boundHealthWatch),
	)
	srv := grpc.NewServer(opts...)
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
// maxStreamsPerConn streams per connection; the floor (grpcfloor) serves with
// them too, so that its floor is the gateway's transport and nothing else.
func TransportOptions(o ServerOptions, maxStreamsPerConn int) []grpc.ServerOption {
	o.setDefaults()
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()),
		grpc.ReadBufferSize(o.BufferBytes),
		grpc.WriteBufferSize(o.BufferBytes),
		grpc.SharedWriteBuffer(true), // idle connections hold no write buffer
		grpc.InitialWindowSize(o.WindowBytes),
		grpc.InitialConnWindowSize(o.WindowBytes),
		grpc.MaxRecvMsgSize(o.MaxRecvBytes),
		grpc.MaxConcurrentStreams(uint32(maxStreamsPerConn)),
		// Before the token check: a client's metadata is decoded whole
		// (gRPC's default allows 16 MiB), and a connection that has not
		// finished its handshake holds its place (120 s by default).
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		grpc.ConnectionTimeout(handshakeTimeout),
		// Ping idle clients so dead connections are found and their
		// subscriptions' partitions freed; never close a healthy idle
		// stream (the report saw idle timeouts cause latency spikes).
		// Old connections are told to go away, so that streams spread
		// to pods added since (moving.go).
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: 30 * time.Second, Timeout: 10 * time.Second,
			MaxConnectionAge: forever(o.MaxConnectionAge), MaxConnectionAgeGrace: forever(o.MaxConnectionAgeGrace),
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}
