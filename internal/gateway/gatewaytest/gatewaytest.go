// Package gatewaytest runs a databus gateway inside a test's process, as
// the tests of its clients (the databus package, the checker, the app)
// and of its authentication need one.
//
//	auth, err := gateway.AuthFiles{Tokens: tokens}.Load()
//	...
//	addr := gatewaytest.Start(t, gateway.Config{Echo: true}, gateway.ServerOptions{Auth: auth})
package gatewaytest

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/highload-lab/hlab/internal/gateway"
)

// Start serves a gateway of cfg with o (its authentication, its buffers)
// on 127.0.0.1:0 until the test ends, and returns its address. At the
// end it drains the gateway's streams for 5 s at most, then stops it.
func Start(t testing.TB, cfg gateway.Config, o gateway.ServerOptions) string {
	t.Helper()
	_, addr := StartGateway(t, cfg, o)
	return addr
}

// StartGateway is Start that returns the gateway too, for a test that
// looks inside it.
func StartGateway(t testing.TB, cfg gateway.Config, o gateway.ServerOptions) (*gateway.Gateway, string) {
	t.Helper()
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return g, Serve(t, g, gateway.NewServer(ctx, g, o))
}

// Serve serves srv, a gRPC server of g (gateway.NewServer's, or one of
// the test's own with interceptors), on 127.0.0.1:0 until the test ends,
// and returns its address. At the end it drains g's streams for 5 s at
// most, then stops srv and closes g.
func Serve(t testing.TB, g *gateway.Gateway, srv *grpc.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		g.Drain(dctx)
		srv.Stop()
		g.Close()
	})
	return ln.Addr().String()
}
