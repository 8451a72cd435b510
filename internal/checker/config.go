package checker

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/kafkasec"
)

// Scenario is what the publishers do.
type Scenario string

const (
	// Echo is the report's transport test: against a gateway started with
	// --echo, one message per request, each waited for (like Latency), so
	// msgs/s are round trips per second. Nothing reaches Kafka, so there
	// is no delivery to verify.
	Echo Scenario = "echo"
	// Latency is the report's latency-optimized client: one message per
	// request, no delay, each ack waited for before the next message.
	Latency Scenario = "latency"
	// Throughput is the report's throughput-optimized client, batches of
	// 100 messages with no delay, pipelined by default: 16 batches in
	// flight, where the report's checker awaited each answer (Inflight 1
	// runs its loop).
	Throughput Scenario = "throughput"
	// Ticker is the report's thousands of quiet clients: each stream sends
	// one message per interval, at a random phase so the streams do not
	// tick in step.
	Ticker Scenario = "ticker"
)

// Scenarios lists the scenarios.
var Scenarios = []Scenario{Echo, Latency, Throughput, Ticker}

// ConsumeMode says when consumers run.
type ConsumeMode string

const (
	// Concurrent consumers run while the publishers publish: end-to-end
	// latency is measured.
	Concurrent ConsumeMode = "concurrent"
	// After consumers start once publishing ended and read everything:
	// the publishers' figures are not disturbed by consumers on the same
	// machine, and the consumers' rate (get-ack cycles/s) is measured on
	// a full topic.
	After ConsumeMode = "after"
	// Only publishes nothing: fresh groups (named after the run, so that
	// each run reads the topic from its start) drain the records the
	// topic holds when the run starts, read from Kafka's start and end
	// offsets (it needs Brokers). Every group must receive every one of
	// them (by partition and offset), and Config.OnWindow brackets the
	// consuming alone: fill the topic with a run of its own, then measure
	// the gateway's CPU over a drain and nothing else.
	Only ConsumeMode = "only"
)

// FaultPhase is when faults fall (Config.FaultPhase).
type FaultPhase string

const (
	// PublishPhase: from the first publish to the end of the window.
	PublishPhase FaultPhase = "publish"
	// ConsumePhase: from the consumers' start (Consume After) until every
	// group has every message or DrainTimeout ends.
	ConsumePhase FaultPhase = "consume"
)

// Config is one checker run. The zero value of each field takes the
// default its comment gives (scenario defaults in brackets).
type Config struct {
	// Target is the gateway's gRPC address, host:port (required).
	Target string
	// Credentials reach a gateway that requires TLS, a client
	// certificate or a token (default: plaintext, no token).
	Credentials databus.Credentials
	// Topic to publish to and consume from ("databus-checker"). It must
	// exist unless Brokers is set, then it is created when missing.
	Topic string
	// Topics, when set, are the topics instead of Topic: stream i
	// publishes to Topics[i % len(Topics)], and each consumer group's
	// members subscribe to every one of them (a subscription per topic,
	// on the member's connection). Report D's checker learned to write
	// ten topics when one topic of 21 partitions capped writes near 1M
	// rps. At most MaxTopics.
	Topics []string
	// TopicCount, when positive, makes Topics TopicCount names with Topic
	// as their prefix: Topic-0, Topic-1, ... It excludes Topics.
	TopicCount int
	// Brokers, when set, lets the checker create Topic (Partitions
	// partitions) if it is missing, and Consume Only read the topic's
	// offsets. The checker never talks to Kafka otherwise.
	Brokers    []string
	Partitions int // 10, per topic
	// Kafka secures the checker's own connections to Brokers (TLS, SASL);
	// the gateway's are the gateway's.
	Kafka kafkasec.Config
	// kafkaOpts are Kafka's franz-go options, set by secureKafka.
	kafkaOpts []kgo.Opt

	Scenario Scenario // Throughput
	// Streams is the number of publish streams, each a client of its own
	// (10; ticker 1000).
	Streams int
	// Connections spreads the streams over this many gRPC connections
	// (databus.Client), round robin. 0 = one per stream, the report's
	// lesson (streams sharing a connection serialize under load).
	Connections int
	// Batch is messages per publish request (echo, latency, ticker: 1;
	// throughput: 100).
	Batch int
	// Inflight is batches sent and not yet answered per stream (echo,
	// latency, ticker: 1, the report's loop: send, await the answer,
	// repeat; throughput: 16).
	Inflight int
	// Interval is the ticker's period per stream (1s).
	Interval time.Duration
	// Rate, when positive, is the messages per second offered by all
	// streams together (echo, latency, throughput), paced per stream: a
	// batch every Streams*Batch/Rate. 0 sends as fast as the in-flight
	// limit allows. Two runs at the same rate, below what either
	// reaches, put the same records in each Kafka produce request: the
	// publish cost's gateway and direct producer compare at it.
	Rate float64
	// Aggregation asks the gateway to share its producers between streams.
	Aggregation bool
	// Direct publishes straight to Kafka (Brokers) instead of through the
	// gateway: one franz-go client per stream, configured as the
	// gateway's per-stream producer (direct.go). It is the baseline of
	// the gateway's publish cost; consumers, if any, still read through
	// the gateway at Target. With Consume Only, which publishes nothing,
	// it is the consumers that go straight to Kafka: a franz-go group
	// member per member, acking and committing as a subscriber of the
	// gateway does (directconsume.go), the baseline of the gateway's
	// subscribe cost.
	Direct bool
	// MessageBytes is the size of each message's value (100; the report
	// gives none). Each message also carries a 28-byte header: run id,
	// stream and sequence number, send time.
	MessageBytes int
	// Payload is what the values hold (Zeros): how well they compress.
	Payload Payload
	// Compression asks the gateway for this codec of the streams'
	// batches in Kafka (x-databus-compression; default: the gateway's).
	Compression string

	// Warmup is published before the measured window (1s; negative: none);
	// its messages are verified too but not counted in rates and latencies.
	Warmup time.Duration
	// Duration is the measured window (10s).
	Duration time.Duration

	// Groups is the number of consumer groups (0: no consumers, nothing
	// verified). Every group must receive every acked message.
	Groups int
	// Members per group (1), each on a connection of its own.
	Members int
	// SubBatch is messages per subscribe response (gateway default 100).
	SubBatch int
	// MaxUnacked is messages delivered and not yet acked per member
	// (gateway default 1000).
	MaxUnacked int
	// ProcessDelay is how long a member "processes" each batch before
	// acking it (0).
	ProcessDelay time.Duration
	// Consume says when consumers run (Concurrent); Only runs no
	// publishers, and the publishing fields above do not apply.
	Consume ConsumeMode
	// DrainTimeout bounds the wait, after publishing, for every group to
	// receive every acked message (30s); past it, the wait goes on while
	// messages still arrive, up to four times as long in all. What is
	// still missing then is lost.
	DrainTimeout time.Duration

	// GatewayMetrics is the gateway's Prometheus /metrics URL. When set,
	// the gateway's RSS is read before the streams open and once they are
	// all open and have each had a first answer: the memory of an open,
	// idle stream.
	GatewayMetrics string
	// Settle is how long the streams stay idle before that second RSS
	// reading (2s).
	Settle time.Duration

	// KillEvery, when positive, injects a fault every KillEvery while the
	// publishers run (warm-up and measured window): the gateway the
	// checker runs (GatewayCmd) is SIGKILLed and started again at once on
	// the same address, or FaultCmd runs. Publishers and consumers ride
	// through as clients must (reconnecting, resending what was not
	// answered), and delivery is verified as without faults; Result.Faults
	// lists them. After a SIGKILL a group waits for the dead member's
	// session to expire (the gateway's --session-timeout): give
	// DrainTimeout more than that. Kills closer together than that plus a
	// few seconds land while groups still rebalance after the previous
	// one. Real Kafka copes; kfake (as of the version in go.mod) never
	// expires a member whose JoinGroup answer went to a dead connection,
	// so such a kill can leave a ghost member holding partitions that no
	// one consumes again: against kfake, space the kills out.
	KillEvery time.Duration
	// GatewayCmd, when set, is a gateway's command line (run by /bin/sh -c
	// in a process group of its own) serving Target: the checker starts it
	// before the run, waits until Target accepts connections, and stops it
	// after the run (SIGTERM, then SIGKILL after 25s).
	GatewayCmd string
	// FaultCmd is a command (/bin/sh -c) run at each fault instead, which
	// injects the fault itself (kill -9 of a gateway something else
	// restarts, deleting a pod); the checker only runs it and records its
	// output. It needs KillEvery, and excludes GatewayCmd.
	FaultCmd string
	// MaxFaults, when positive, ends the schedule after that many faults:
	// one kill in a phase that lasts long.
	MaxFaults int
	// FaultPhase is when KillEvery's faults fall: while publishing
	// (PublishPhase, the default) or, with Consume After, while the
	// consumers drain the topic (ConsumePhase): a gateway killed in the
	// middle of deliveries and acks.
	FaultPhase FaultPhase
	// Inject, when set, injects each fault itself: a program that embeds
	// the checker and runs the gateway (the lab) SIGKILLs and restarts it
	// here, and returns once it serves again. It excludes GatewayCmd,
	// FaultCmd and DropMember.
	Inject func(ctx context.Context) error
	// DropMember makes each fault a member's: one member that holds a
	// batch it received and has not acked has its TCP connection reset
	// under gRPC (no goodbye, as when its process is SIGKILLed) and then
	// subscribes again as a new member. What it held must come again.
	// It needs Groups and excludes GatewayCmd, FaultCmd and Inject.
	DropMember bool
	// GatewayLog receives the output of GatewayCmd's gateway (nil: none).
	GatewayLog io.Writer
	// StartTimeout bounds how long GatewayCmd's gateway may take to accept
	// connections, at the start and after each kill, and how long FaultCmd
	// may run (30s).
	StartTimeout time.Duration

	// Nacks and dead letters (nack.go, deadletter.go). NackFraction
	// (0 to 1) of the messages are nacked by each member on their first
	// delivery, chosen by a hash of their ID, and acked when they come
	// again; PoisonKeys messages (the first PoisonKeys of those whose
	// index is a multiple of poisonStride) are nacked at every delivery.
	// Each nack asks for the message again after NackDelay (0: at once).
	NackFraction float64
	NackDelay    time.Duration
	PoisonKeys   int
	// MaxDeliveries, when positive, asks the gateway to dead-letter a
	// message nacked at that delivery (x-databus-max-deliveries), to
	// DeadLetterTopic (default the topic's name and ".dlq", created with
	// Brokers when missing). The checker then reads the dead-letter
	// topic straight from Kafka (Brokers) and counts each message once
	// across the topic and it: poison messages must be dead-lettered,
	// once per group, with delivery count MaxDeliveries; the rest acked.
	MaxDeliveries   int
	DeadLetterTopic string

	// OnWindow, when set, is called with true when the measured window
	// opens and with false when it closes: a caller sampling the gateway's
	// CPU and memory samples exactly the window. With Consume Only the
	// window is the consuming: it opens as the members dial and join, and
	// closes once every group has every record (or DrainTimeout ended),
	// before the members leave.
	OnWindow func(open bool)
}

func (c *Config) setDefaults() {
	c.Scenario = cmp.Or(c.Scenario, Throughput)
	// The scenarios' own shapes: the ticker's thousands of quiet streams,
	// the throughput client's batches of 100 with 16 in flight.
	streams, batch, inflight := 10, 1, 1
	switch c.Scenario {
	case Ticker:
		streams = 1000
	case Throughput:
		batch, inflight = 100, 16
	}
	c.Topic = cmp.Or(c.Topic, "databus-checker")
	if len(c.Topics) == 0 && c.TopicCount <= MaxTopics {
		c.Topics = countedTopics(c.Topic, max(c.TopicCount, 0))
	}
	c.Partitions = cmp.Or(c.Partitions, 10)
	c.Streams = cmp.Or(c.Streams, streams)
	c.Batch = cmp.Or(c.Batch, batch)
	c.Inflight = cmp.Or(c.Inflight, inflight)
	c.Interval = cmp.Or(c.Interval, time.Second)
	c.MessageBytes = cmp.Or(c.MessageBytes, 100)
	c.Payload = cmp.Or(c.Payload, Zeros)
	switch {
	case c.Warmup == 0:
		c.Warmup = time.Second
	case c.Warmup < 0:
		c.Warmup = 0
	}
	c.Duration = cmp.Or(c.Duration, 10*time.Second)
	if c.Groups > 0 && c.Members == 0 {
		c.Members = 1
	}
	c.FaultPhase = cmp.Or(c.FaultPhase, PublishPhase)
	c.Consume = cmp.Or(c.Consume, Concurrent)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 30*time.Second)
	c.Settle = cmp.Or(c.Settle, 2*time.Second)
	c.StartTimeout = cmp.Or(c.StartTimeout, 30*time.Second)
	if c.MaxDeliveries > 0 {
		c.DeadLetterTopic = cmp.Or(c.DeadLetterTopic, c.Topics[0]+databusv1.DeadLetterSuffix)
	}
}

func (c *Config) validate() error {
	switch {
	case c.Target == "" && (!c.Direct || c.Groups > 0 && c.Consume != Only):
		return fmt.Errorf("%w: no gateway address: give --target host:port", ErrConfig)
	case c.Scenario != Echo && c.Scenario != Latency && c.Scenario != Throughput && c.Scenario != Ticker:
		return fmt.Errorf("%w: unknown scenario %q: use echo, latency, throughput or ticker", ErrConfig, c.Scenario)
	case c.TopicCount < 0 || c.TopicCount > MaxTopics || len(c.Topics) > MaxTopics:
		return fmt.Errorf("%w: %d topics: give 1 to %d", ErrConfig, max(c.TopicCount, len(c.Topics)), MaxTopics)
	case c.TopicCount > 0 && !slices.Equal(c.Topics, countedTopics(c.Topic, c.TopicCount)):
		return fmt.Errorf("%w: give --topics (the names) or --topic-count (names made from --topic), not both", ErrConfig)
	case hasDuplicate(c.Topics):
		return fmt.Errorf("%w: --topics %s names a topic twice: each stream's topic is the next in the list, so list each once", ErrConfig, strings.Join(c.Topics, ","))
	case len(c.Topics) > c.Streams && c.Consume != Only && c.Scenario != Echo:
		return fmt.Errorf("%w: %d topics but %d streams: some topics would get no stream; give at least --streams %d", ErrConfig, len(c.Topics), c.Streams, len(c.Topics))
	case c.Consume == Only && len(c.Topics) > 1:
		return fmt.Errorf("%w: --consume only drains one topic: give --topic", ErrConfig)
	case c.Streams < 1:
		return fmt.Errorf("%w: %d streams: give at least one", ErrConfig, c.Streams)
	case c.Streams >= 1<<24:
		return fmt.Errorf("%w: %d streams: at most %d", ErrConfig, c.Streams, 1<<24-1)
	case c.Connections < 0:
		return fmt.Errorf("%w: %d connections: give 0 (one per stream) or more", ErrConfig, c.Connections)
	case c.Batch < 1 || c.Batch > 10000:
		return fmt.Errorf("%w: batch %d: give 1 to 10000 messages", ErrConfig, c.Batch)
	case c.Inflight < 1 || c.Inflight > 1024:
		return fmt.Errorf("%w: in flight %d: give 1 to 1024 batches", ErrConfig, c.Inflight)
	case c.Rate < 0 || c.Rate > MaxRate:
		return fmt.Errorf("%w: rate %g: give messages per second, 0 (as fast as the in-flight limit allows) to %g", ErrConfig, c.Rate, float64(MaxRate))
	case c.Rate > 0 && c.Scenario == Ticker:
		return fmt.Errorf("%w: the ticker's rate is --streams / --interval: drop --rate, or use another scenario", ErrConfig)
	case c.Interval < 0 || c.Duration <= 0 || c.ProcessDelay < 0 || c.DrainTimeout < 0:
		return fmt.Errorf("%w: durations must not be negative, and the run's duration must be positive", ErrConfig)
	case !slices.Contains(Payloads, c.Payload):
		return fmt.Errorf("%w: payload %q: use zeros, text or random", ErrConfig, c.Payload)
	case c.Compression != "" && !slices.Contains(databusv1.Compressions, c.Compression):
		return fmt.Errorf("%w: compression %q: use one of %s, or leave it out for the gateway's default", ErrConfig, c.Compression, strings.Join(databusv1.Compressions, ", "))
	case c.MessageBytes < 0:
		return fmt.Errorf("%w: message size %d: give 0 or more bytes", ErrConfig, c.MessageBytes)
	case c.Groups < 0 || c.Members < 0:
		return fmt.Errorf("%w: %d groups x %d members: give positive numbers", ErrConfig, c.Groups, c.Members)
	case c.Scenario == Echo && c.Groups > 0:
		return fmt.Errorf("%w: the echo scenario publishes to a gateway without Kafka (--echo), so there is nothing to consume: drop --groups", ErrConfig)
	case c.Consume != Concurrent && c.Consume != After && c.Consume != Only:
		return fmt.Errorf("%w: consume mode %q: use concurrent, after or only", ErrConfig, c.Consume)
	case c.Consume == Only && (c.Groups == 0 || len(c.Brokers) == 0):
		return fmt.Errorf("%w: --consume only drains what --topic holds: give --groups, and --brokers so the checker can read the topic's offsets", ErrConfig)
	case c.Consume == Only && c.KillEvery > 0 && c.FaultPhase != ConsumePhase:
		return fmt.Errorf("%w: --consume only publishes nothing: give --fault-phase consume for its faults", ErrConfig)
	}
	if err := c.validateDirect(); err != nil {
		return err
	}
	if err := c.validateNacks(); err != nil {
		return err
	}
	return c.validateFaults()
}

func (c *Config) validateFaults() error {
	injectors := 0
	for _, set := range []bool{c.GatewayCmd != "", c.FaultCmd != "", c.Inject != nil, c.DropMember} {
		if set {
			injectors++
		}
	}
	switch {
	case c.FaultPhase != PublishPhase && c.FaultPhase != ConsumePhase:
		return fmt.Errorf("%w: fault phase %q: use publish or consume", ErrConfig, c.FaultPhase)
	case c.FaultPhase == ConsumePhase && (c.Consume == Concurrent || c.Groups == 0):
		return fmt.Errorf("%w: --fault-phase consume needs consumers that start once publishing ended: give --groups and --consume after (or only)", ErrConfig)
	case c.DropMember && c.Groups == 0:
		return fmt.Errorf("%w: --drop-member needs consumer groups: give --groups", ErrConfig)
	case injectors > 1 && (c.Inject != nil || c.DropMember):
		return fmt.Errorf("%w: give one way to inject faults: --gateway-cmd, --fault-cmd, --drop-member or an Inject function", ErrConfig)
	case c.DropMember && c.KillEvery == 0:
		return fmt.Errorf("%w: --drop-member drops a member every --kill-every: give --kill-every too", ErrConfig)
	case c.KillEvery < 0 || c.StartTimeout < 0 || c.MaxFaults < 0:
		return fmt.Errorf("%w: --kill-every, --max-faults and the start timeout must not be negative", ErrConfig)
	case c.GatewayCmd != "" && c.FaultCmd != "":
		return fmt.Errorf("%w: give --gateway-cmd (the checker runs the gateway and SIGKILLs it) or --fault-cmd (a command injects the fault), not both", ErrConfig)
	case c.FaultCmd != "" && c.KillEvery == 0:
		return fmt.Errorf("%w: --fault-cmd runs every --kill-every: give --kill-every too", ErrConfig)
	case c.KillEvery > 0 && injectors == 0:
		return fmt.Errorf("%w: --kill-every needs a gateway to kill: give --gateway-cmd \"<its command line, serving --target>\", or --fault-cmd \"<a command that injects the fault>\", or --drop-member", ErrConfig)
	case c.KillEvery > 0 && c.FaultPhase == PublishPhase && c.KillEvery >= c.Warmup+c.Duration:
		return fmt.Errorf("%w: --kill-every %v is not shorter than the run's %v of publishing: no fault would be injected", ErrConfig, c.KillEvery, c.Warmup+c.Duration)
	}
	return nil
}

// MaxTopics bounds Config.Topics: each consumer group member holds a
// subscription per topic.
const MaxTopics = 1000

// countedTopics are Config.TopicCount's topics: n names with prefix, or
// prefix alone when n is 0.
func countedTopics(prefix string, n int) []string {
	if n == 0 {
		return []string{prefix}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// topicOf is stream i's topic: the topics taken in turn.
func (c *Config) topicOf(stream int) string { return c.Topics[stream%len(c.Topics)] }

func hasDuplicate(names []string) bool {
	sorted := slices.Sorted(slices.Values(names))
	return len(slices.Compact(sorted)) != len(names)
}
