package gateway_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
)

// listServices asks a gateway's server reflection for its services, as
// grpcurl's "list" does, with metadata md.
func listServices(t *testing.T, addr string, md ...string) ([]string, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(metadata.AppendToOutgoingContext(ctx, md...))
	if err != nil {
		return nil, err
	}
	// A stream the server has already refused fails Send with io.EOF;
	// its status is Recv's (grpc-go's SendMsg).
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names, nil
}

// TestReflection: the gateway describes its API to grpcurl and the like
// (no .proto file needed); with --tokens, only to a known token.
func TestReflection(t *testing.T) {
	t.Run("open gateway", func(t *testing.T) {
		names, err := listServices(t, gatewaytest.Start(t, gateway.Config{Echo: true}, gateway.ServerOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(names, databusv1.DataBus_ServiceDesc.ServiceName) {
			t.Fatalf("reflection lists %v, want %s among them", names, databusv1.DataBus_ServiceDesc.ServiceName)
		}
	})
	t.Run("gateway with tokens", func(t *testing.T) {
		ts, err := gateway.ParseTokens(strings.NewReader("token-a publish=orders\n"))
		if err != nil {
			t.Fatal(err)
		}
		addr := gatewaytest.Start(t, gateway.Config{Echo: true}, gateway.ServerOptions{Auth: &gateway.Auth{Tokens: ts}})
		if _, err := listServices(t, addr); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("without a token: %v, want Unauthenticated", err)
		}
		names, err := listServices(t, addr, "authorization", "Bearer token-a")
		if err != nil {
			t.Fatalf("with a known token: %v", err)
		}
		if !slices.Contains(names, databusv1.DataBus_ServiceDesc.ServiceName) {
			t.Fatalf("reflection lists %v, want %s among them", names, databusv1.DataBus_ServiceDesc.ServiceName)
		}
	})
}
