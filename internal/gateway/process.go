package gateway

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/server"
)

// Defaults of a gateway process.
const (
	DefaultGRPCAddr     = "127.0.0.1:7070"
	DefaultHTTPAddr     = "127.0.0.1:7071" // /healthz and /metrics
	DefaultDrainTimeout = 20 * time.Second
	// DefaultMaxConnections is Options.MaxConnections's default: twice
	// the report's 10,000 connections to one pod (the lab's ticker opens
	// as many, and its verifying subscribers on top).
	DefaultMaxConnections = 20000
)

// Options is what a gateway process takes beyond its HTTP server's flags
// (/healthz, when Kafka answers, and Prometheus /metrics; Go's profiles
// on the admin address only): the gateway's Config, its gRPC address,
// the drain on shutdown and the auth files.
type Options struct {
	Config
	// GRPCAddr is where clients connect (default 127.0.0.1:7070).
	GRPCAddr string
	// DrainTimeout bounds the graceful drain on shutdown (default 20s).
	DrainTimeout time.Duration
	// Auth names the TLS and token files (nothing: plaintext, no auth).
	Auth AuthFiles
	// Kafka secures the connections to Kafka: TLS, SASL (zero: plaintext).
	Kafka kafkasec.Config
	// MaxConnections bounds the client connections served at once
	// (default DefaultMaxConnections): one more is closed as soon as it
	// is accepted.
	MaxConnections int
	// MaxConnectionAge and MaxConnectionAgeGrace are ServerOptions'
	// (defaults DefaultMaxConnectionAge, DefaultMaxConnectionAgeGrace;
	// negative: never).
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// GOMAXPROCS, when positive, sets the process's GOMAXPROCS (default:
	// Go's, which under a CPU quota rounds the quota up, to 2 at least):
	// how the lab runs one gateway at GOMAXPROCS=1 beside one at 2.
	GOMAXPROCS int
}

// RegisterFlags adds the gateway's flags to fs (its HTTP address is the
// server's: --addr under hlab serve, --http-addr for cmd/databus).
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	c := &o.Config
	fs.StringVar(&o.GRPCAddr, "grpc-addr", DefaultGRPCAddr, "gRPC address clients connect to")
	fs.Var(cliflag.List(&c.Brokers), "brokers", "Kafka seed brokers, host:port,... (required unless --echo)")
	fs.BoolVar(&c.Echo, "echo", false, "answer publishes at once without Kafka (transport test)")
	fs.IntVar(&c.MaxInflight, "max-inflight", 16, "default batches in flight per publish stream")
	fs.IntVar(&c.MaxUnacked, "max-unacked", 1000, "default cap per subscribe stream on messages held: delivered from its oldest unacked one on, acked or not")
	fs.IntVar(&c.BatchSize, "batch-size", 100, "default messages per subscribe batch")
	fs.IntVar(&c.MaxMessageBytes, "max-message-bytes", 1<<20, "largest message accepted")
	fs.Var(cliflag.AtLeast(&c.FetchMaxBytes, 1024), "fetch-max-bytes", "bytes one fetch brings of one partition (default 32768); a group's fetch carries up to 32 partitions")
	fs.DurationVar(&c.ProduceTimeout, "produce-timeout", 10*time.Second, "how long a record may wait for Kafka")
	fs.DurationVar(&c.AggregationLinger, "aggregation-linger", 5*time.Millisecond, "how long shared producers wait to fill a batch")
	fs.DurationVar(&c.CommitInterval, "commit-interval", time.Second, "how often acked offsets are committed")
	fs.DurationVar(&c.SessionTimeout, "session-timeout", 10*time.Second, "consumer-group session timeout")
	fs.DurationVar(&c.ConnIdleTimeout, "kafka-conn-idle-timeout", DefaultConnIdleTimeout, "how long a Kafka connection may idle before it is closed and the next request dials anew (franz-go's ConnIdleTimeout; 100ms to 15m)")
	fs.DurationVar(&c.LagInterval, "lag-interval", DefaultLagInterval, "how often the consumer lag of the groups served here is read from Kafka (databus_consumer_lag)")
	fs.StringVar(&c.Compression, "compression", DefaultCompression, "codec of the record batches written to Kafka when a publish stream asks for none: none, gzip, snappy, lz4 or zstd (the default is franz-go's: snappy, or none for a broker too old for it); a batch the codec does not shrink goes uncompressed")
	fs.Var(cliflag.List(&c.CompressionAllowed), "compression-allowed", "codecs a publish stream may ask for in metadata x-databus-compression, e.g. none,lz4,zstd (default: all five); --compression's is always allowed, others are refused with InvalidArgument. Aggregated streams share one producer per codec, each codec beyond --compression counted in --max-kafka-clients")
	fs.Var(cliflag.Not(&c.NoMetrics), "metrics", "the gateway's own Prometheus metrics, updated per stream, batch and message (false: none; /metrics still serves the Go runtime and process metrics)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", DefaultDrainTimeout, "how long shutdown waits for streams to finish")
	// Limits: a stream past a count limit is refused with ResourceExhausted
	// naming the flag; bytes limits make streams wait.
	fs.IntVar(&c.MaxStreams, "max-streams", 0, fmt.Sprintf("streams (publish, subscribe and health Watch) one gateway serves at once; more are refused (default %d, or fewer under a cgroup memory limit, sized with --max-kafka-clients so that all fit and logged at start: see docs/systems/databus.md, \"Sizing a pod\")", DefaultMaxStreams))
	fs.Var(cliflag.AtLeast(&o.MaxConnections, 1), "max-connections", fmt.Sprintf("client connections served at once (default %d); one more is closed as soon as it is accepted, before its handshake", DefaultMaxConnections))
	fs.IntVar(&c.MaxStreamsPerConnection, "max-streams-per-conn", DefaultMaxStreamsPerConnection, "streams one client connection may have open (gRPC MaxConcurrentStreams); more wait")
	fs.IntVar(&c.MaxKafkaClients, "max-kafka-clients", 0, fmt.Sprintf("Kafka clients of one gateway, about 1 MiB each: the shared producer, one more per codec aggregated streams use beyond --compression, one per publish stream without aggregation, one per subscribed group and topic; streams needing more are refused (default %d, or fewer under a cgroup memory limit, sized with --max-streams)", DefaultMaxKafkaClients))
	fs.Int64Var(&c.MaxStreamBytes, "max-stream-bytes", 16<<20, "message bytes one stream may have in flight (publish: read, not answered; subscribe: fetched, not sent)")
	fs.Int64Var(&c.MaxGatewayBytes, "max-gateway-bytes", DefaultMaxGatewayBytes, "message bytes all streams may have in flight together")
	fs.DurationVar(&c.SendTimeout, "send-timeout", 30*time.Second, "how long a send to a subscriber may wait for it to read before its stream ends and its partitions go to other subscribers")
	fs.DurationVar(&o.MaxConnectionAge, "max-connection-age", DefaultMaxConnectionAge, "how old a client connection gets (±10%) before the gateway tells its client to go away and ends its streams in good order (batches answered, acks committed); the client reconnects through the load balancer, so that pods added since take a share of long-lived streams. Each subscribe stream moved may rebalance its group: keep it in minutes. Negative: never")
	fs.DurationVar(&o.MaxConnectionAgeGrace, "max-connection-age-grace", DefaultMaxConnectionAgeGrace, "how long an aged connection's streams get to end in good order before the connection is closed under them; cover --produce-timeout. Negative: never")
	// Nacks, retries and dead letters.
	fs.DurationVar(&c.MaxNackDelay, "max-nack-delay", DefaultMaxNackDelay, "longest delay a nack may ask for before its message is redelivered; longer ones are cut to it (databus_nack_delays_cut_total)")
	fs.IntVar(&c.MaxPendingRetries, "max-pending-retries", DefaultMaxPendingRetries, "nacked messages the gateway holds for redelivery or dead-lettering, over all streams; a nack past it ends its stream with RESOURCE_EXHAUSTED (its messages are redelivered, nothing is lost)")
	fs.IntVar(&c.MaxDeliveries, "max-deliveries", DefaultMaxDeliveries, "largest x-databus-max-deliveries a subscribe stream may ask for: a message nacked when it has been delivered that many times goes to its dead-letter topic")
	fs.Var(cliflag.AtLeast(&o.GOMAXPROCS, 1), "gomaxprocs", "Go's GOMAXPROCS for the process (default: Go's own, from the CPUs and the CPU quota)")
	o.Auth.RegisterFlags(fs)
	o.Kafka.RegisterFlags(fs)
}

// Args returns the command line that makes a gateway process run o (the
// fields o changes from the defaults).
func (o Options) Args() []string { return cliflag.Args(o) }

// secureKafka adds sec's options to c's Kafka clients and, when sec asks
// for TLS or SASL, checks them against the seed brokers: a wrong password
// or an untrusted certificate stops the gateway at start, naming the
// broker and the mechanism, rather than failing every stream later. A
// broker that does not answer only gets a warning: the gateway serves,
// and reports not ready (/healthz) until Kafka answers.
func secureKafka(ctx context.Context, c *Config, sec kafkasec.Config, logger *slog.Logger) error {
	if c.Echo || !sec.Enabled() {
		return nil
	}
	opts, err := sec.Opts()
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if w := sec.Warning(); w != "" {
		logger.Warn(w)
	}
	c.KafkaOpts = append(opts, c.KafkaOpts...)
	err = sec.Check(ctx, c.Brokers, cmp.Or(c.KafkaTimeout, 5*time.Second))
	if errors.Is(err, kafkasec.ErrRefused) || (err != nil && !errors.Is(err, kafkasec.ErrUnreachable)) {
		return fmt.Errorf("gateway: the start check of --brokers with the --kafka-* settings failed: %w", err)
	}
	if err != nil {
		logger.Warn("Kafka did not answer the start check; serving anyway, not ready until it does", "err", err)
	}
	return nil
}

// Serve runs a gateway process, its HTTP endpoints on hs, until ctx ends,
// then drains: batches in flight are answered, acked offsets committed,
// and streams closed with Unavailable.
func Serve(ctx context.Context, hs server.Config, o Options) error {
	logger := cmp.Or(hs.Logger, slog.Default())
	if o.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(o.GOMAXPROCS)
	}
	auth, err := o.Auth.Load()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	c := o.Config
	if err := sizeFromMemoryLimit(&c, logger); err != nil {
		return err
	}
	c.Registry, c.Logger = reg, logger
	if err := secureKafka(ctx, &c, o.Kafka, logger); err != nil {
		return err
	}
	g, err := New(c)
	if err != nil {
		return err
	}
	defer g.Close()
	grpcAddr := cmp.Or(o.GRPCAddr, DefaultGRPCAddr)
	ln, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return fmt.Errorf("gateway: cannot listen on %s (is the port taken? pass another --grpc-addr): %w", grpcAddr, err)
	}
	ln = limitConns(ln, cmp.Or(o.MaxConnections, DefaultMaxConnections), reg, logger)
	srvCtx, stopHealth := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHealth()
	grpcSrv := NewServer(srvCtx, g, ServerOptions{Auth: auth, MaxConnectionAge: o.MaxConnectionAge, MaxConnectionAgeGrace: o.MaxConnectionAgeGrace})
	grpcErr := make(chan error, 1)
	go func() { grpcErr <- grpcSrv.Serve(ln) }()
	logger.Info("databus gateway serving gRPC", "addr", ln.Addr().String(), "echo", c.Echo, "brokers", c.Brokers,
		"kafka_security", o.Kafka.Describe(), "gomaxprocs", runtime.GOMAXPROCS(0), "metrics", !c.NoMetrics, "compression", g.cfg.Compression, "compression_allowed", g.cfg.allowedCompressions())
	auth.logMode(logger)
	if auth != nil && auth.files != nil {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go auth.Watch(srvCtx, hup, DefaultReloadEvery, reg, logger)
	}

	hs.Name, hs.Registry, hs.Logger = "databus", reg, logger
	hs.Ready = func() error { return g.Ready(ctx) }
	httpErr := make(chan error, 1)
	go func() { httpErr <- server.Run(ctx, hs, http.NotFoundHandler()) }()

	select {
	case err := <-grpcErr:
		return fmt.Errorf("gateway: gRPC server stopped: %w", err)
	case err := <-httpErr:
		if err != nil {
			grpcSrv.Stop()
			return err
		}
	case <-ctx.Done():
	}
	drain := cmp.Or(o.DrainTimeout, DefaultDrainTimeout)
	logger.Info("databus gateway draining", "timeout", drain)
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := Stop(dctx, grpcSrv, g); err != nil {
		return err
	}
	if err := <-httpErr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Stop stops srv, which serves g, in good order within ctx: it tells
// every client connection to go away (HTTP/2 GOAWAY) and takes no new
// ones, so that clients open their new streams elsewhere, through their
// load balancer; g's streams end as moved streams do (moving.go): batches
// read are answered, acks committed. Past ctx, srv is stopped at once.
// Drained first and told to go away after, clients would reopen their
// streams on the same connection, to be refused until it closed.
func Stop(ctx context.Context, srv *grpc.Server, g *Gateway) error {
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	g.awaitGoAway(ctx, time.Second)
	drainErr := g.Drain(ctx)
	select {
	case <-stopped:
	case <-ctx.Done():
		srv.Stop()
	}
	return drainErr
}
