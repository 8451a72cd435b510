package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/highload-lab/hlab/internal/server"
)

// "hlab serve kfake" runs franz-go's fake Kafka cluster as a process of
// its own: the lab's embedded Kafka for the databus experiment, kept out
// of the lab's process so that the checker there and kfake do not share a
// heap and a garbage collector, and so its CPU and memory can be sampled
// apart. It is also the quickest Kafka to try the gateway with.
func init() {
	services["kfake"] = service{
		summary: "franz-go's kfake, an in-memory fake Kafka (embedded default): --kafka-addr, --topics",
		run: func(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
			srv := serverFlags(fs, "HTTP address for /healthz and /metrics", false)
			kafkaAddr := fs.String("kafka-addr", "127.0.0.1:9092", "address the Kafka protocol listens on")
			partitions := fs.Int("partitions", 10, "partitions of topics created without a count (and of --topics)")
			topics := fs.String("topics", "", "topics to create at start, comma-separated")
			return func(ctx context.Context, logger *slog.Logger) error {
				host, portStr, err := net.SplitHostPort(*kafkaAddr)
				port, perr := strconv.Atoi(portStr)
				if err != nil || perr != nil || (host != "127.0.0.1" && host != "localhost" && host != "") {
					return fmt.Errorf("--kafka-addr %q: give 127.0.0.1:PORT (kfake listens on loopback only)", *kafkaAddr)
				}
				opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port), kfake.DefaultNumPartitions(*partitions)}
				var ts []string
				for _, t := range strings.Split(*topics, ",") {
					if t = strings.TrimSpace(t); t != "" {
						ts = append(ts, t)
					}
				}
				if len(ts) > 0 {
					opts = append(opts, kfake.SeedTopics(int32(*partitions), ts...))
				}
				c, err := kfake.NewCluster(opts...)
				if err != nil {
					return fmt.Errorf("kfake: cannot start on %s (is the port taken?): %w", *kafkaAddr, err)
				}
				defer c.Close()
				logger.Info("kfake serving the Kafka protocol", "addrs", c.ListenAddrs(), "topics", ts)
				srv.Name, srv.Registry, srv.Logger = "kfake", prometheus.NewRegistry(), logger
				return server.Run(ctx, *srv, http.NotFoundHandler())
			}
		},
	}
}
