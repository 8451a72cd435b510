// Command databus is the databus gateway: gRPC streams in front of Kafka
// (see the databus package for the client, api/databus/v1 for the API).
//
//	databus --brokers kafka-1:9092,kafka-2:9092 --grpc-addr :7070 --http-addr :7071
//	databus --brokers kafka-1:9093 --kafka-tls-ca /etc/kafka/ca.crt --kafka-sasl SCRAM-SHA-512 \
//	    --kafka-user databus --kafka-password-file /run/secrets/kafka-password
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/server"
)

func main() {
	fs := flag.NewFlagSet("databus", flag.ExitOnError)
	var (
		hs server.Config
		o  gateway.Options
	)
	fs.StringVar(&hs.Addr, "http-addr", gateway.DefaultHTTPAddr, "HTTP address for /healthz and /metrics (profiles: --admin-addr)")
	hs.RegisterFlags(fs)
	o.RegisterFlags(fs)
	fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := gateway.Serve(ctx, hs, o); err != nil {
		fmt.Fprintln(os.Stderr, "databus:", err)
		os.Exit(1)
	}
}
