package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// DefaultMaxStreamsPerConnection is Config.MaxStreamsPerConnection's
// default.
const DefaultMaxStreamsPerConnection = 1000

// DefaultConnIdleTimeout is Config.ConnIdleTimeout's default: franz-go's
// own (v1.22: 30s).
const DefaultConnIdleTimeout = 30 * time.Second

// Defaults of the subscribe side that a consumer reading Kafka itself
// and acking as a subscriber does (the checker's direct consumer) takes
// too: Config.CommitInterval's, Config.BatchSize's and
// Config.MaxUnacked's.
const (
	DefaultCommitInterval = time.Second
	DefaultBatchSize      = 100
	DefaultMaxUnacked     = 1000
)

// Config configures a Gateway. Only Brokers is required (or Echo). Every
// zero field takes the default its comment gives.
type Config struct {
	// Brokers are the Kafka seed brokers, host:port.
	Brokers []string
	// Echo answers publishes at once without Kafka (the report's transport
	// test); subscribing fails with FailedPrecondition.
	Echo bool
	// MaxInflight is the default of x-databus-max-inflight (16).
	MaxInflight int
	// MaxUnacked is the default of x-databus-max-unacked (1000).
	MaxUnacked int
	// BatchSize is the default of x-databus-batch-size (100).
	BatchSize int
	// MaxMessageBytes bounds one message's key+value+headers (1 MiB);
	// larger ones are rejected with InvalidArgument in the batch's errors.
	MaxMessageBytes int
	// MaxBatchMessages bounds messages per publish batch (10000).
	MaxBatchMessages int
	// FetchMaxBytes bounds what one fetch brings of one partition (32 KiB,
	// the report's choice: Kafka's 50 MB default times 10k streams does
	// not fit in memory). A group's member fetches for all its streams at
	// once, up to 32 partitions' worth per fetch. Kafka counts these bytes
	// as stored (compressed) and always returns a partition's first record
	// batch whole, so a fetch may bring more.
	FetchMaxBytes int32
	// ProduceTimeout bounds how long a record may wait for Kafka (10s);
	// past it the record fails with Unavailable.
	ProduceTimeout time.Duration
	// AggregationLinger is how long shared producers wait to fill a batch
	// (5ms). Per-stream producers do not linger.
	AggregationLinger time.Duration
	// CommitInterval is how often acked offsets are committed (1s); they
	// are also committed on revocation and when a stream ends.
	CommitInterval time.Duration
	// SessionTimeout is the consumer-group session timeout (10s): how long
	// a gateway that died silently holds its partitions.
	SessionTimeout time.Duration
	// KafkaTimeout bounds metadata checks and commits (5s).
	KafkaTimeout time.Duration
	// MaxStreams bounds the streams, publish and subscribe, one gateway
	// serves at once (DefaultMaxStreams, 12,000: the report's 10,000 per
	// pod, with room for reconnects; a gateway process under a memory
	// limit sizes it from the limit, see SizeLimits). A stream past it is
	// refused with ResourceExhausted.
	MaxStreams int
	// MaxStreamsPerConnection is gRPC's MaxConcurrentStreams (1,000). gRPC
	// enforces it per connection before the gateway sees a stream: grpc-go
	// clients wait for one of their streams to end, others get HTTP/2
	// REFUSED_STREAM (Unavailable).
	MaxStreamsPerConnection int
	// MaxKafkaClients bounds the gateway's Kafka clients
	// (DefaultMaxKafkaClients, 1,024, or sized as MaxStreams is): the
	// shared producer (always counted), one more per codec aggregated
	// streams use beyond Compression, one producer per publish stream
	// without aggregation, and one group member per (group, topic) that
	// has subscribe streams here, however many streams that is. A stream
	// that needs a client past it is refused with ResourceExhausted.
	MaxKafkaClients int
	// MaxStreamBytes bounds one stream's message bytes in flight (16 MiB):
	// publish batches read and not yet answered; subscribe messages fetched
	// and not yet handed to gRPC. At the limit the gateway stops reading
	// the publish stream, or fetching for the subscribe stream, until bytes
	// are answered or sent; one batch or fetch may cross it. A publish
	// batch larger than the limit is refused with ResourceExhausted.
	MaxStreamBytes int64
	// MaxGatewayBytes bounds the same bytes over all streams (256 MiB),
	// the same way: streams wait, none is refused for it. Beyond it, each
	// group member's Kafka client may hold one fetch it has not handed
	// out yet (see FetchMaxBytes).
	MaxGatewayBytes int64
	// SendTimeout bounds one send to a subscribe stream (30s): a client
	// that reads nothing for that long (HTTP/2 flow control holds the
	// send) has its stream ended with DeadlineExceeded, and its partitions
	// and unacked messages go to the group's other streams.
	SendTimeout time.Duration
	// ConnIdleTimeout is franz-go's ConnIdleTimeout for every Kafka client
	// of the gateway (DefaultConnIdleTimeout, franz-go's default): a
	// connection idle longer is not reused, and the next request dials
	// anew. The report saw idle-connection timeouts cause seconds-long
	// latency spikes; franz-go accepts 100ms to 15m.
	ConnIdleTimeout time.Duration
	// LagInterval is how often the gateway reads from Kafka the lag of
	// the partitions its group members own (DefaultLagInterval), for
	// databus_consumer_lag. Each reading is one kadm Lag request set,
	// bounded by KafkaTimeout; none is made while no group is served.
	LagInterval time.Duration
	// NoMetrics switches the gateway's own Prometheus instrumentation off
	// (--metrics=false): no counter, gauge or histogram is updated per
	// stream, batch or message, and the Kafka clients run without the
	// hook that counts their requests. /metrics still serves the Go
	// runtime and process metrics (the lab reads the gateway's RSS there).
	// It is how the cost of the metrics is measured (the report: ~17%).
	NoMetrics bool
	// Registry receives the gateway's metrics (default: a new registry).
	Registry prometheus.Registerer
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Compression is the codec of the batches the gateway's producers
	// write to Kafka when a stream does not ask for one: none, gzip,
	// snappy, lz4 or zstd (DefaultCompression, franz-go's default). A
	// batch that its codec does not shrink goes uncompressed (franz-go).
	Compression string
	// CompressionAllowed lists the codecs a publish stream may ask for
	// in x-databus-compression (default: all of them); the default codec
	// is always allowed. Another codec is refused with InvalidArgument.
	// Aggregated streams share one producer per codec: each codec in use
	// beyond the default takes a place of MaxKafkaClients.
	CompressionAllowed []string
	// KafkaOpts are extra franz-go options for every client (tests, TLS, SASL).
	KafkaOpts []kgo.Opt

	// Nacks, retries and dead letters (retry.go, deadletter.go).
	//
	// MaxNackDelay bounds a nack's delay (DefaultMaxNackDelay, 15m):
	// longer ones are cut to it.
	MaxNackDelay time.Duration
	// MaxPendingRetries bounds the nacked messages the gateway holds for
	// redelivery or dead-lettering, over all its streams
	// (DefaultMaxPendingRetries); a nack past it ends its stream with
	// ResourceExhausted.
	MaxPendingRetries int
	// MaxDeliveries is the largest x-databus-max-deliveries a stream may
	// ask for (DefaultMaxDeliveries).
	MaxDeliveries int
}

// Defaults of the nack bounds.
const (
	DefaultMaxNackDelay      = 15 * time.Minute
	DefaultMaxPendingRetries = 100000
	DefaultMaxDeliveries     = 100
)

// setDefaults is the one place defaults are set: every zero field takes
// the value its comment gives.
func (c *Config) setDefaults() {
	c.MaxInflight = cmp.Or(c.MaxInflight, 16)
	c.MaxUnacked = cmp.Or(c.MaxUnacked, DefaultMaxUnacked)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, 1<<20)
	c.MaxBatchMessages = cmp.Or(c.MaxBatchMessages, 10000)
	c.FetchMaxBytes = cmp.Or(c.FetchMaxBytes, 32<<10)
	c.ProduceTimeout = cmp.Or(c.ProduceTimeout, 10*time.Second)
	c.AggregationLinger = cmp.Or(c.AggregationLinger, 5*time.Millisecond)
	c.CommitInterval = cmp.Or(c.CommitInterval, DefaultCommitInterval)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, 10*time.Second)
	c.KafkaTimeout = cmp.Or(c.KafkaTimeout, 5*time.Second)
	c.MaxStreams = cmp.Or(c.MaxStreams, DefaultMaxStreams)
	c.MaxStreamsPerConnection = cmp.Or(c.MaxStreamsPerConnection, DefaultMaxStreamsPerConnection)
	c.MaxKafkaClients = cmp.Or(c.MaxKafkaClients, DefaultMaxKafkaClients)
	c.MaxStreamBytes = cmp.Or(c.MaxStreamBytes, 16<<20)
	c.MaxGatewayBytes = cmp.Or(c.MaxGatewayBytes, DefaultMaxGatewayBytes)
	c.SendTimeout = cmp.Or(c.SendTimeout, 30*time.Second)
	c.ConnIdleTimeout = cmp.Or(c.ConnIdleTimeout, DefaultConnIdleTimeout)
	c.LagInterval = cmp.Or(c.LagInterval, DefaultLagInterval)
	c.Compression = cmp.Or(c.Compression, DefaultCompression)
	// Nacks, retries and dead letters.
	c.MaxNackDelay = cmp.Or(c.MaxNackDelay, DefaultMaxNackDelay)
	c.MaxPendingRetries = cmp.Or(c.MaxPendingRetries, DefaultMaxPendingRetries)
	c.MaxDeliveries = cmp.Or(c.MaxDeliveries, DefaultMaxDeliveries)
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// validateLimits refuses limits below what can work (zero takes the
// default, so only negative ones or too few Kafka clients get here).
func (c *Config) validateLimits() error {
	for _, l := range []struct {
		flag     string
		v, least int64
	}{
		{"--max-streams", int64(c.MaxStreams), 1},
		{"--max-streams-per-conn", int64(c.MaxStreamsPerConnection), 1},
		{"--max-kafka-clients", int64(c.MaxKafkaClients), 1},
		{"--max-stream-bytes", c.MaxStreamBytes, 1},
		{"--max-gateway-bytes", c.MaxGatewayBytes, 1},
		{"--send-timeout", int64(c.SendTimeout), 1},
		{"--lag-interval", int64(c.LagInterval), 1},
		{"--max-nack-delay", int64(c.MaxNackDelay), 1},
		{"--max-pending-retries", int64(c.MaxPendingRetries), 1},
		{"--max-deliveries", int64(c.MaxDeliveries), 1},
	} {
		if l.v < l.least {
			return fmt.Errorf("%w: %s is %d: give a positive value (or leave it out for the default)", ErrBadLimit, l.flag, l.v)
		}
	}
	// franz-go's own bounds, checked here so that the flag is named.
	if c.ConnIdleTimeout < 100*time.Millisecond || c.ConnIdleTimeout > 15*time.Minute {
		return fmt.Errorf("%w: --kafka-conn-idle-timeout is %v: give 100ms to 15m (franz-go's bounds), or leave it out for %v", ErrBadLimit, c.ConnIdleTimeout, DefaultConnIdleTimeout)
	}
	if c.MaxStreamsPerConnection > math.MaxUint32 {
		return fmt.Errorf("%w: --max-streams-per-conn is %d, above HTTP/2's %d", ErrBadLimit, c.MaxStreamsPerConnection, uint32(math.MaxUint32))
	}
	return nil
}

// Gateway implements databusv1.DataBusServer.
type Gateway struct {
	databusv1.UnimplementedDataBusServer

	cfg Config
	m   *metrics
	log *slog.Logger

	// ctx outlives streams: records accepted from a stream are produced
	// even if the stream goes away. It ends with Close.
	ctx    context.Context
	cancel context.CancelFunc

	drainOnce sync.Once
	draining  chan struct{}
	streams   sync.WaitGroup
	// pubs are the publish streams, ended by a drain (moving.go).
	pubsMu sync.Mutex
	pubs   map[*publisher]struct{}

	sharedOnce sync.Once
	shared     *kgo.Client // aggregated producer, also used for metadata
	sharedErr  error
	// sharedByCodec are the aggregated producers of the codecs other
	// than the default.
	sharedByCodec sharedProducers

	topicsMu sync.Mutex
	topics   map[string]time.Time // topic -> when it was last seen to exist
	replicas replicaChecks        // why produces time out (replicas.go)

	open    atomic.Int64 // streams open (MaxStreams)
	clients atomic.Int64 // Kafka clients open or reserved (MaxKafkaClients)
	bytes   budget       // message bytes in flight (MaxGatewayBytes)

	membersMu sync.Mutex
	members   map[memberKey]*member // the group members serving subscribe streams

	// retriesPending counts the nacked messages held for redelivery or
	// dead-lettering (Config.MaxPendingRetries).
	retriesPending atomic.Int64

	lagLoop sync.WaitGroup // reads the consumer lag while the gateway runs
	gatesMu sync.Mutex
	gates   []*recvGate // of the servers serving g (NewServer): their connections
}

// New returns a gateway for cfg. It does not contact Kafka until a stream
// needs it.
func New(cfg Config) (*Gateway, error) {
	cfg.setDefaults()
	if len(cfg.Brokers) == 0 && !cfg.Echo {
		return nil, ErrNoBrokers
	}
	if err := cfg.validateLimits(); err != nil {
		return nil, err
	}
	cfg.CompressionAllowed = slices.Clone(cfg.CompressionAllowed)
	if err := cfg.validateCompression(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{
		cfg: cfg, m: offMetrics(), log: cfg.Logger,
		ctx: ctx, cancel: cancel,
		draining: make(chan struct{}),
		pubs:     map[*publisher]struct{}{},
		topics:   map[string]time.Time{},
		members:  map[memberKey]*member{},
	}
	if !cfg.NoMetrics {
		g.m = newMetrics(cfg.Registry)
		if !cfg.Echo {
			gc := newGroupCollector(g)
			cfg.Registry.MustRegister(gc)
			g.lagLoop.Go(func() { gc.lagLoop(ctx, cfg.LagInterval) })
		}
	}
	g.bytes.limit = cfg.MaxGatewayBytes
	if !cfg.Echo {
		g.clients.Store(1) // the shared producer's place, taken when first needed
	}
	return g, nil
}

// Ready reports whether the gateway can serve: in echo mode always; else
// when Kafka answers a metadata request.
func (g *Gateway) Ready(ctx context.Context) error {
	if g.cfg.Echo {
		return nil
	}
	select {
	case <-g.draining:
		return ErrDraining
	default:
	}
	cl, err := g.sharedClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.KafkaTimeout)
	defer cancel()
	if _, err := kadm.NewClient(cl).BrokerMetadata(ctx); err != nil {
		return fmt.Errorf("gateway: Kafka unreachable at %v: %w", g.cfg.Brokers, err)
	}
	return nil
}

// Drain stops taking new batches and messages: publish streams finish the
// batches in flight and answer them, subscribe streams commit what was
// acked, and every stream ends with Unavailable. It returns when all
// streams ended or ctx is done.
func (g *Gateway) Drain(ctx context.Context) error {
	g.drainOnce.Do(g.startDrain)
	done := make(chan struct{})
	go func() { g.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gateway: streams still open after the drain deadline: %w", ctx.Err())
	}
}

// startDrain tells every stream to end: subscribe streams watch
// g.draining, publish streams are ended here (moving.go).
func (g *Gateway) startDrain() {
	close(g.draining)
	g.endPublishers()
}

// Close releases the gateway's Kafka clients. Call it after Drain.
func (g *Gateway) Close() {
	g.drainOnce.Do(g.startDrain)
	g.closeMembers()
	g.cancel()
	g.lagLoop.Wait() // it may be using the shared client
	g.closeSharedProducers()
	if g.shared != nil {
		g.shared.Close()
	}
}

func (g *Gateway) kafkaOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(g.cfg.Brokers...),
		kgo.DialTimeout(g.cfg.KafkaTimeout),
		kgo.RequestTimeoutOverhead(g.cfg.KafkaTimeout),
		kgo.RecordDeliveryTimeout(g.cfg.ProduceTimeout),
		kgo.RetryTimeout(g.cfg.KafkaTimeout),
		kgo.ProducerBatchMaxBytes(int32(max(g.cfg.MaxMessageBytes+1024, 1<<20))),
		kgo.ConnIdleTimeout(g.cfg.ConnIdleTimeout),
	}
	if g.m.on {
		opts = append(opts, kgo.WithHooks(kafkaHook{g.m}))
	}
	opts = append(opts, g.cfg.KafkaOpts...)
	return append(opts, extra...)
}

// sharedClient returns the aggregated producer of the default codec,
// which also answers metadata checks for every stream.
func (g *Gateway) sharedClient() (*kgo.Client, error) {
	g.sharedOnce.Do(func() {
		g.shared, g.sharedErr = kgo.NewClient(g.producerOpts(g.cfg.Compression, g.cfg.AggregationLinger)...)
		if g.sharedErr != nil {
			g.sharedErr = fmt.Errorf("gateway: Kafka client: %w", g.sharedErr)
			return
		}
		g.m.kafkaClients.WithLabelValues(clientShared).Inc()
	})
	return g.shared, g.sharedErr
}

// checkTopic returns NotFound for a topic Kafka does not have and
// Unavailable when Kafka cannot be asked. Known topics are cached briefly.
func (g *Gateway) checkTopic(ctx context.Context, topic string) error {
	g.topicsMu.Lock()
	seen, ok := g.topics[topic]
	g.topicsMu.Unlock()
	if ok && time.Since(seen) < 30*time.Second {
		return nil
	}
	cl, err := g.sharedClient()
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.KafkaTimeout)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return streamError(codes.Unavailable, "Kafka is unreachable (%v): retry with backoff", err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return streamError(codes.NotFound, "topic %q does not exist: check the name, or create the topic first", topic)
	}
	if d.Err != nil {
		return streamError(codes.Unavailable, "Kafka cannot describe topic %q (%v): retry with backoff", topic, d.Err)
	}
	g.topicsMu.Lock()
	g.topics[topic] = time.Now()
	g.topicsMu.Unlock()
	return nil
}

// ended counts a stream's end and passes its error on.
func (g *Gateway) ended(err error) error {
	if err != nil {
		g.m.streamErrors.WithLabelValues(status.Code(err).String()).Inc()
	}
	return err
}

// codeFor maps a produce error to the code a client acts on.
func codeFor(err error) codes.Code {
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge), errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage):
		return codes.InvalidArgument
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return codes.NotFound
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return codes.PermissionDenied
	default: // timeouts, unreachable brokers, leader changes, a closing gateway
		return codes.Unavailable
	}
}

// newClient makes a franz-go client, with an error a user can act on.
func newClient(opts []kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("gateway: Kafka client: %w", err)
	}
	return cl, nil
}
