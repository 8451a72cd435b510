// Package kafkafake is "hlab serve kfake": franz-go's kfake, an in-memory
// fake Kafka cluster, as a process of its own.
//
// It is the lab's embedded Kafka for the databus experiment, kept out of
// the lab's process so that the checker there and kfake do not share a
// heap and a garbage collector, and so its CPU and memory can be sampled
// apart. It is also the quickest Kafka to try the gateway with.
package kafkafake

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/server"
)

// Defaults of the fake cluster.
const (
	DefaultKafkaAddr  = "127.0.0.1:9092"
	DefaultPartitions = 10
)

// Config configures the fake cluster.
type Config struct {
	// KafkaAddr is where the Kafka protocol listens: 127.0.0.1:PORT
	// (default 127.0.0.1:9092; kfake listens on loopback only).
	KafkaAddr string
	// Partitions is the partition count of topics created without one,
	// and of Topics (default 10).
	Partitions int
	// Topics are created at start.
	Topics []string
	// DataDir, when set, keeps the cluster's state there (kfake.DataDir:
	// topics, records, committed offsets, producer ids) and reloads it at
	// start. Every write reaches the file at once, without an fsync, as a
	// real broker's log reaches the page cache: a SIGKILLed process
	// started again on the same directory comes back with every record it
	// acknowledged (a machine's crash could lose the last ones). Default:
	// in memory only.
	DataDir string
}

// RegisterFlags adds the fake cluster's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.KafkaAddr, "kafka-addr", DefaultKafkaAddr, "address the Kafka protocol listens on")
	fs.IntVar(&c.Partitions, "partitions", DefaultPartitions, "partitions of topics created without a count (and of --topics)")
	fs.Var(cliflag.List(&c.Topics), "topics", "topics to create at start, comma-separated")
	fs.StringVar(&c.DataDir, "data-dir", "", "keep the cluster's state in this directory and reload it at start, so a killed kfake comes back with its records (default: in memory only)")
}

// Args returns the command line that makes "hlab serve kfake" run c.
func (c Config) Args() []string { return cliflag.Args(c) }

// Serve runs the cluster, with /healthz and /metrics on srv, until ctx
// ends.
func Serve(ctx context.Context, srv server.Config, c Config) error {
	addr := cmp.Or(c.KafkaAddr, DefaultKafkaAddr)
	host, portStr, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || (host != "127.0.0.1" && host != "localhost" && host != "") {
		return fmt.Errorf("--kafka-addr %q: give 127.0.0.1:PORT (kfake listens on loopback only)", addr)
	}
	partitions := cmp.Or(c.Partitions, DefaultPartitions)
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port), kfake.DefaultNumPartitions(partitions)}
	if len(c.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(partitions), c.Topics...))
	}
	if c.DataDir != "" {
		opts = append(opts, kfake.DataDir(c.DataDir))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("kfake: cannot start on %s (is the port taken?): %w", addr, err)
	}
	defer cluster.Close()
	logger := cmp.Or(srv.Logger, slog.Default())
	logger.Info("kfake serving the Kafka protocol", "addrs", cluster.ListenAddrs(), "topics", c.Topics, "data_dir", c.DataDir)
	srv.Name, srv.Registry, srv.Logger = "kfake", prometheus.NewRegistry(), logger
	return server.Run(ctx, srv, http.NotFoundHandler())
}
