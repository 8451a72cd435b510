package gateway

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// DefaultCompression is Config.Compression's default: franz-go's own
// (ProducerBatchCompression's default preference is snappy, then none
// for brokers older than snappy).
const DefaultCompression = "snappy"

// kafkaCodecs maps the values of x-databus-compression to franz-go's
// codecs. Each falls back to none, as franz-go's default does, for a
// broker too old for it (zstd needs Kafka 2.1).
var kafkaCodecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

// compressionOpt is the producer option for codec, a key of kafkaCodecs.
func compressionOpt(codec string) kgo.ProducerOpt {
	if codec == "none" {
		return kgo.ProducerBatchCompression(kgo.NoCompression())
	}
	return kgo.ProducerBatchCompression(kafkaCodecs[codec], kgo.NoCompression())
}

// validateCompression checks the default codec and the allow-list, and
// normalizes both to lower case.
func (c *Config) validateCompression() error {
	c.Compression = strings.ToLower(c.Compression)
	if _, ok := kafkaCodecs[c.Compression]; !ok {
		return fmt.Errorf("%w: --compression is %q: give one of %s", ErrBadCompression, c.Compression, strings.Join(databusv1.Compressions, ", "))
	}
	for i, a := range c.CompressionAllowed {
		c.CompressionAllowed[i] = strings.ToLower(a)
		if _, ok := kafkaCodecs[c.CompressionAllowed[i]]; !ok {
			return fmt.Errorf("%w: --compression-allowed has %q: list codecs of %s", ErrBadCompression, a, strings.Join(databusv1.Compressions, ", "))
		}
	}
	return nil
}

// allowedCompressions is what a stream may ask for: the allow-list (every
// codec when it is empty) and the default, which asking for is the same
// as not asking.
func (c *Config) allowedCompressions() []string {
	var out []string
	for _, name := range databusv1.Compressions {
		if name == c.Compression || len(c.CompressionAllowed) == 0 || slices.Contains(c.CompressionAllowed, name) {
			out = append(out, name)
		}
	}
	return out
}

// compressionFrom reads a stream's x-databus-compression (v, trimmed):
// the gateway's default when empty, else a codec the operator allows.
func (g *Gateway) compressionFrom(v string) (string, error) {
	if v == "" {
		return g.cfg.Compression, nil
	}
	codec := strings.ToLower(v)
	if _, ok := kafkaCodecs[codec]; !ok {
		return "", streamError(codes.InvalidArgument, "metadata %q is %q, not a codec: use one of %s, or leave it out for this gateway's default (%s)", MDCompression, v, strings.Join(databusv1.Compressions, ", "), g.cfg.Compression)
	}
	allowed := g.cfg.allowedCompressions()
	if !slices.Contains(allowed, codec) {
		return "", streamError(codes.InvalidArgument, "metadata %q is %q, which this gateway does not allow (--compression-allowed): use one of %s, or leave it out for the default (%s)", MDCompression, v, strings.Join(allowed, ", "), g.cfg.Compression)
	}
	return codec, nil
}

// sharedProducers are the aggregated producers, one per codec: streams
// that share a producer share its batches, and a batch has one codec.
// The default codec's is the gateway's shared client (sharedClient),
// which also answers metadata; the others are made when a stream first
// asks for their codec, each counted against MaxKafkaClients, and live
// until the gateway closes.
type sharedProducers struct {
	mu      sync.Mutex
	clients map[string]*kgo.Client
}

// sharedProducer returns the aggregated producer for codec, making it on
// first use, or the refusal when no Kafka client may be added.
func (g *Gateway) sharedProducer(codec string) (*kgo.Client, error) {
	if codec == g.cfg.Compression {
		return g.sharedClient()
	}
	g.sharedByCodec.mu.Lock()
	defer g.sharedByCodec.mu.Unlock()
	if cl := g.sharedByCodec.clients[codec]; cl != nil {
		return cl, nil
	}
	if err := g.acquireClient(clientShared); err != nil {
		return nil, err
	}
	cl, err := newClient(g.producerOpts(codec, g.cfg.AggregationLinger))
	if err != nil {
		g.releaseClient(clientShared)
		return nil, streamError(codes.Unavailable, "%v", err)
	}
	if g.sharedByCodec.clients == nil {
		g.sharedByCodec.clients = map[string]*kgo.Client{}
	}
	g.sharedByCodec.clients[codec] = cl
	return cl, nil
}

// closeSharedProducers closes the producers sharedProducer made.
func (g *Gateway) closeSharedProducers() {
	g.sharedByCodec.mu.Lock()
	defer g.sharedByCodec.mu.Unlock()
	for codec, cl := range g.sharedByCodec.clients {
		cl.Close()
		delete(g.sharedByCodec.clients, codec)
	}
}

// producerOpts are a producer's options: codec's compression, linger,
// and the hook that counts the bytes its batches take before and after
// compression.
func (g *Gateway) producerOpts(codec string, linger time.Duration) []kgo.Opt {
	opts := []kgo.Opt{compressionOpt(codec), kgo.ProducerLinger(linger)}
	if g.m.on {
		opts = append(opts, kgo.WithHooks(g.m.produceHook(codec)))
	}
	return g.kafkaOpts(opts...)
}

// produceBytesHook counts the record bytes of the batches one producer
// wrote, before and after compression (franz-go sends a batch that its
// codec does not shrink uncompressed: then both are the same).
type produceBytesHook struct{ uncompressed, compressed prometheus.Counter }

var _ kgo.HookProduceBatchWritten = produceBytesHook{}

func (h produceBytesHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.uncompressed.Add(float64(m.UncompressedBytes))
	h.compressed.Add(float64(m.CompressedBytes))
}
