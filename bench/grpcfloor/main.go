// Command grpcfloor is the least a grpc-go server of the databus API can
// be, for bench/databus.sh to print beside the gateway: Publish answered
// by a bare Recv/Send loop on one goroutine per stream, with the gateway's
// own transport settings (gateway.TransportOptions), no limits, no
// metrics, no drain. What the gateway costs beyond it, per round trip and
// per idle stream, is the gateway's own work; what grpcfloor costs is
// grpc-go's and the kernel's on this machine.
//
// It serves gRPC on --grpc-addr and, on --addr, /healthz and /metrics (the
// Go and process collectors: process_resident_memory_bytes for the
// checker's --gateway-metrics).
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/gateway"
)

func main() {
	grpcAddr := flag.String("grpc-addr", "127.0.0.1:7070", "gRPC listen address")
	httpAddr := flag.String("addr", "127.0.0.1:8080", "HTTP listen address (/healthz, /metrics)")
	flag.Parse()

	ln, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		log.Fatalf("grpcfloor: %v (pass another --grpc-addr)", err)
	}
	srv := grpc.NewServer(gateway.TransportOptions(gateway.ServerOptions{}, gateway.DefaultMaxStreamsPerConnection)...)
	databusv1.RegisterDataBusServer(srv, echo{})

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.Handle("/metrics", promhttp.Handler())
	hs := &http.Server{Addr: *httpAddr, Handler: mux}
	go func() {
		if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("grpcfloor: %v (pass another --addr)", err)
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Stop()
		_ = hs.Close()
	}()
	if err := srv.Serve(ln); err != nil {
		log.Fatalf("grpcfloor: %v", err)
	}
}

// echo answers every publish batch at once, as the gateway's --echo does.
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
	return status.Error(codes.Unimplemented, "grpcfloor serves Publish only: it is the floor of the echo and idle-stream figures")
}
