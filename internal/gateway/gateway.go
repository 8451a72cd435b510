// Package gateway is the server side of databus: gRPC bidirectional
// streams in front of Kafka (report D). Publish streams get a producer of
// their own (latency first) or share the gateway's (aggregation: batching
// first); subscribe streams are consumer-group members whose offsets are
// committed only as far as the client acked. It is stateless: any number
// of gateways serve the same topics and groups, and Kafka's group protocol
// balances partitions over their streams.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
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
	// FetchMaxBytes bounds what one subscription fetches from Kafka at a
	// time (32 KiB, the report's choice: Kafka's 50 MB default times 10k
	// streams does not fit in memory).
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
	// Registry receives the gateway's metrics (default: a new registry).
	Registry prometheus.Registerer
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// KafkaOpts are extra franz-go options for every client (tests, TLS, SASL).
	KafkaOpts []kgo.Opt
}

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxInflight, 16)
	def(&c.MaxUnacked, 1000)
	def(&c.BatchSize, 100)
	def(&c.MaxMessageBytes, 1<<20)
	def(&c.MaxBatchMessages, 10000)
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = 32 << 10
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&c.ProduceTimeout, 10*time.Second)
	defDur(&c.AggregationLinger, 5*time.Millisecond)
	defDur(&c.CommitInterval, time.Second)
	defDur(&c.SessionTimeout, 10*time.Second)
	defDur(&c.KafkaTimeout, 5*time.Second)
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
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

	sharedOnce sync.Once
	shared     *kgo.Client // aggregated producer, also used for metadata
	sharedErr  error

	topicsMu sync.Mutex
	topics   map[string]time.Time // topic -> when it was last seen to exist
}

// New returns a gateway for cfg. It does not contact Kafka until a stream
// needs it.
func New(cfg Config) (*Gateway, error) {
	cfg.setDefaults()
	if len(cfg.Brokers) == 0 && !cfg.Echo {
		return nil, ErrNoBrokers
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Gateway{
		cfg: cfg, m: newMetrics(cfg.Registry), log: cfg.Logger,
		ctx: ctx, cancel: cancel,
		draining: make(chan struct{}),
		topics:   map[string]time.Time{},
	}, nil
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
	g.drainOnce.Do(func() { close(g.draining) })
	done := make(chan struct{})
	go func() { g.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gateway: streams still open after the drain deadline: %w", ctx.Err())
	}
}

// Close releases the gateway's Kafka clients. Call it after Drain.
func (g *Gateway) Close() {
	g.drainOnce.Do(func() { close(g.draining) })
	g.cancel()
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
		kgo.WithHooks(kafkaHook{g.m}),
	}
	opts = append(opts, g.cfg.KafkaOpts...)
	return append(opts, extra...)
}

// sharedClient returns the aggregated producer, which also answers
// metadata checks for every stream.
func (g *Gateway) sharedClient() (*kgo.Client, error) {
	g.sharedOnce.Do(func() {
		g.shared, g.sharedErr = kgo.NewClient(g.kafkaOpts(kgo.ProducerLinger(g.cfg.AggregationLinger))...)
		if g.sharedErr != nil {
			g.sharedErr = fmt.Errorf("gateway: Kafka client: %w", g.sharedErr)
		}
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
