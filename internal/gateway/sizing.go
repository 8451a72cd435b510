package gateway

import (
	"cmp"
	"fmt"
	"log/slog"

	"github.com/highload-lab/hlab/internal/procfs"
)

// What the gateway's memory is spent on, as the sizing counts it. The
// figures are resident memory (RSS), garbage not yet collected included,
// and round up what the project measured:
//
//   - StreamCost: an open stream on a connection of its own (several
//     streams per connection cost about half). The databus lab's idle rows
//     measured 45 KB per stream at 10,000 streams, a connection each (24
//     KB at 10 per connection); BenchmarkMemoryCost, a gateway process
//     with 1,000 publish streams, 50 KiB.
//   - ProducerCost: the franz-go producer of a publish stream without
//     aggregation, on top of its stream. The lab's ticker rows saw 0.5 to
//     1 MB each under load (1,000 producers held 560 MB); idle, after one
//     message, BenchmarkMemoryCost sees about 150 KiB. 1 MiB is the top
//     of the loaded figure: a producer's buffers grow with what it sends.
//   - BaseCost: the process before its first stream (BenchmarkMemoryCost:
//     22 MiB), with room for the shared producer's buffers under load.
//
// A member (one per subscribed group and topic) counts as a Kafka client
// at ProducerCost: its fetch buffers are bounded by --fetch-max-bytes and
// counted in the message bytes below.
const (
	StreamCost   = 50 << 10
	ProducerCost = 1 << 20
	BaseCost     = 64 << 20
	// SizingHeadroom is the share of the memory limit left unplanned: the
	// garbage collector lets the heap overshoot what is live, and the
	// kernel counts the page cache of the process's files in its cgroup.
	SizingHeadroom = 0.10
)

// The limits' defaults without a memory limit, and the most sizing gives:
// the report's 10,000 streams per pod with room for reconnects, and
// producers for a tenth of them.
const (
	DefaultMaxStreams      = 12000
	DefaultMaxKafkaClients = 1024
)

// DefaultMaxGatewayBytes is Config.MaxGatewayBytes's default: the message
// bytes all streams may hold at once, which the sizing sets apart.
const DefaultMaxGatewayBytes = 256 << 20

// Sizing is what SizeLimits chose, and from what.
type Sizing struct {
	MemoryLimit     int64 // bytes; 0: none found
	LimitFile       string
	MaxGatewayBytes int64 // message bytes the budget leaves room for
	Budget          int64 // bytes left for streams and Kafka clients
	MaxStreams      int
	MaxKafkaClients int
	Sized           bool // the limit decided at least one of them
}

// SizeLimits chooses --max-streams and --max-kafka-clients for a memory
// limit of limit bytes (0: none) when they are not given (zero): the
// limit, less SizingHeadroom, BaseCost and the message bytes
// --max-gateway-bytes lets streams hold, is shared between streams at
// StreamCost and Kafka clients at ProducerCost in the proportion of their
// defaults (12,000 to 1,024), so that every stream and every client at
// once still fits. Neither goes above its default: a larger pod keeps the
// defaults. Without a limit both keep their defaults. A value given stays
// as given and takes no part in the sharing: the other is sized as if
// both were not given, so giving one never shrinks the other.
//
// A limit too small for one stream and two clients (the shared producer
// and one more) after the message bytes is an error that says what to
// change.
func SizeLimits(limit, maxGatewayBytes int64, maxStreams, maxKafkaClients int) (Sizing, error) {
	s := Sizing{MemoryLimit: limit, MaxGatewayBytes: maxGatewayBytes, MaxStreams: maxStreams, MaxKafkaClients: maxKafkaClients}
	if maxStreams > 0 && maxKafkaClients > 0 {
		return s, nil
	}
	if limit <= 0 {
		s.MaxStreams = cmp.Or(maxStreams, DefaultMaxStreams)
		s.MaxKafkaClients = cmp.Or(maxKafkaClients, DefaultMaxKafkaClients)
		return s, nil
	}
	s.Budget = limit - int64(float64(limit)*SizingHeadroom) - BaseCost - maxGatewayBytes
	full := int64(DefaultMaxStreams)*StreamCost + int64(DefaultMaxKafkaClients)*ProducerCost
	streams := min(DefaultMaxStreams, int(max(0, s.Budget)*DefaultMaxStreams/full))
	clients := min(DefaultMaxKafkaClients, int(max(0, s.Budget)*DefaultMaxKafkaClients/full))
	if streams < 1 || clients < 2 {
		return s, fmt.Errorf("%w: the memory limit of %d MiB leaves %d MiB for streams and Kafka clients after %d%% headroom, %d MiB for the gateway itself and %d MiB of message bytes (--max-gateway-bytes): give the gateway more memory, lower --max-gateway-bytes, or set --max-streams and --max-kafka-clients yourself",
			ErrBadLimit, limit>>20, s.Budget>>20, int(SizingHeadroom*100), BaseCost>>20, maxGatewayBytes>>20)
	}
	s.Sized = true
	s.MaxStreams = cmp.Or(maxStreams, streams)
	s.MaxKafkaClients = cmp.Or(maxKafkaClients, clients)
	return s, nil
}

// sizeFromMemoryLimit applies SizeLimits to c with the process's cgroup
// memory limit, and logs what it chose and from what.
func sizeFromMemoryLimit(c *Config, logger *slog.Logger) error {
	if c.MaxStreams != 0 && c.MaxKafkaClients != 0 {
		return nil
	}
	limit, file := procfs.MemoryLimit()
	gatewayBytes := cmp.Or(c.MaxGatewayBytes, DefaultMaxGatewayBytes)
	s, err := SizeLimits(limit, gatewayBytes, c.MaxStreams, c.MaxKafkaClients)
	if err != nil {
		return err
	}
	c.MaxStreams, c.MaxKafkaClients = s.MaxStreams, s.MaxKafkaClients
	if !s.Sized {
		logger.Info("databus gateway limits: no cgroup memory limit found, defaults kept",
			"max_streams", s.MaxStreams, "max_kafka_clients", s.MaxKafkaClients)
		return nil
	}
	logger.Info("databus gateway limits sized from the memory limit",
		"memory_limit_mib", limit>>20, "from", file, "max_gateway_bytes_mib", gatewayBytes>>20,
		"budget_mib", s.Budget>>20, "stream_cost_kib", StreamCost>>10, "producer_cost_kib", ProducerCost>>10,
		"max_streams", s.MaxStreams, "max_kafka_clients", s.MaxKafkaClients)
	return nil
}
