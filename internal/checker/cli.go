package checker

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/internal/cliflag"
)

// The lines Main writes to stderr (unless --quiet) as the measured window
// opens and closes.
const (
	WindowOpenLine   = "databus-checker: measured window open"
	WindowClosedLine = "databus-checker: measured window closed"
)

// Main is the databus-checker command line; it returns the exit code:
// 0 when nothing was lost, 1 when messages were lost or the run failed,
// 2 for bad usage.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("databus-checker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: databus-checker [flags]

Drives a databus gateway with report D's checker scenarios and verifies
delivery: every message Kafka acknowledged must reach every consumer group.

Scenarios (--scenario):
  echo        one message per request, each answer awaited; against a
              gateway started with --echo (no Kafka): round trips/s
  latency     one message per request, no delay, each ack awaited
  throughput  batches of 100, 16 in flight per stream, no delay
  ticker      one message per --interval on each of --streams streams
Direct: --direct produces the scenario's messages straight to --brokers
  with franz-go, one client per stream set up as the gateway's own
  per-stream producer (no linger, acks=all): the baseline of the
  gateway's publish cost. --groups still read through --target.
  With --consume only it is the consumers that go straight to Kafka: a
  franz-go group member per member (the gateway's balancer and fetch
  sizes), acking each batch of --sub-batch records and committing only
  what it acked, as the gateway does: the baseline of the gateway's
  subscribe cost (no --target needed; the result gives its CPU).
Consumers: --groups G --members M [--sub-batch N] [--delay D]
  [--consume concurrent|after]; without --groups nothing is verified.
  --consume only publishes nothing: fresh groups drain the records --topic
  holds (offsets read through --brokers), each group must get every one,
  and the result's rates cover the drain alone: fill the topic with one
  run (--groups 0), then time drains of it, each its own run.
Nacks and dead letters: --nack-fraction F [--nack-delay D] has each member
  nack a fraction of the messages once (they must come again, and are then
  acked); --poison-keys K --max-deliveries N makes K messages poison, nacked
  at every delivery, which the gateway must write to the dead-letter topic
  (--dead-letter-topic, default <topic>.dlq) at delivery N while the rest
  flow. The checker reads that topic from Kafka (--brokers) and counts each
  message once across the topic and it: a poison message not dead-lettered
  is lost, one dead-lettered twice or also received a duplicate, one that
  is not poison dead-lettered wrong.
Topics: --topics a,b,c spreads the streams over the topics in turn (stream
  i writes to topic i mod n); --topic-count N does the same over N topics
  named --topic-0 ... --topic-(N-1). With --brokers each is created with
  --partitions partitions. Each group's members subscribe to every topic.
  Report D: one topic of 21 partitions capped writes near 1M rps; ten
  topics fixed it.
Secured gateway: --tls-ca FILE [--tls-cert FILE --tls-key FILE] (mutual
  TLS), --token-file FILE (its bearer token; needs TLS or --plaintext-token).
Faults: --kill-every D SIGKILLs, every D while publishing, the gateway the
  checker runs (--gateway-cmd "<command line serving --target>"), and starts
  it again on the same address; or runs --fault-cmd "<command>" instead;
  or, with --drop-member, resets the connection of a member that holds a
  batch it has not acked. --fault-phase consume moves the faults to the
  drain of --consume after members. Delivery is verified across the
  faults; they are listed in the result.

Examples:
  hlab serve databus --echo --grpc-addr 127.0.0.1:7070 &
  databus-checker --target 127.0.0.1:7070 --scenario echo --streams 50
  databus-checker --target 127.0.0.1:7070 --topic orders --brokers 127.0.0.1:9092 \
      --scenario throughput --streams 10 --groups 2 --members 3
  databus-checker --target 127.0.0.1:7070 --topic orders --brokers 127.0.0.1:9092 \
      --topic-count 10 --partitions 2 --streams 20 --groups 1
  databus-checker --target 127.0.0.1:7070 --topic orders --brokers 127.0.0.1:9092 \
      --consume only --groups 1 --members 4
  databus-checker --topic orders --brokers 127.0.0.1:9092 --direct \
      --consume only --groups 1 --members 4
  databus-checker --target 127.0.0.1:7070 --topic orders --brokers kafka-1:9093 --direct \
      --kafka-tls-ca ca.crt --kafka-sasl SCRAM-SHA-512 --kafka-user checker --kafka-password-file checker.password
  databus-checker --target 127.0.0.1:7070 --topic orders --groups 1 --duration 30s \
      --kill-every 10s --drain-timeout 60s \
      --gateway-cmd "hlab serve databus --brokers 127.0.0.1:9092 --grpc-addr 127.0.0.1:7070"
  databus-checker --target 127.0.0.1:7070 --topic orders --groups 1 --members 3 \
      --kill-every 3s --drop-member --drain-timeout 60s
  databus-checker --target 127.0.0.1:7070 --topic orders --brokers 127.0.0.1:9092 \
      --groups 1 --members 2 --nack-fraction 0.01 --nack-delay 100ms \
      --poison-keys 20 --max-deliveries 3

Flags:
`)
		fs.PrintDefaults()
	}
	var (
		c       Config
		brokers string
		scen    string
		consume string
		asJSON  bool
		quiet   bool
	)
	fs.StringVar(&c.Target, "target", "127.0.0.1:7070", "the gateway's gRPC address")
	c.Credentials.RegisterFlags(fs, "")
	fs.StringVar(&c.Topic, "topic", "databus-checker", "topic to publish to and consume from (use a fresh one, or --brokers to create it); with --topic-count, the prefix of the topics' names")
	fs.Var(cliflag.List(&c.Topics), "topics", "topics to spread the streams over, a,b,...: stream i writes to the (i mod n)th; every group reads them all (instead of --topic)")
	fs.IntVar(&c.TopicCount, "topic-count", 0, fmt.Sprintf("spread the streams over this many topics, named <--topic>-0 to <--topic>-(N-1) (1 to %d; instead of --topics)", MaxTopics))
	fs.StringVar(&brokers, "brokers", "", "Kafka brokers, host:port,...: create the topics when missing, and read the topic's offsets for --consume only (the checker talks to Kafka for nothing else)")
	c.Kafka.RegisterFlags(fs)
	fs.IntVar(&c.Partitions, "partitions", 10, "partitions of each topic the checker creates")
	fs.StringVar(&scen, "scenario", "throughput", "echo, latency, throughput or ticker")
	fs.IntVar(&c.Streams, "streams", 0, "publish streams (default 10; ticker 1000)")
	fs.IntVar(&c.Connections, "connections", 0, "gRPC connections the streams share, round robin (0 = one per stream)")
	share := fs.Bool("share", false, "put every stream on one connection (same as --connections 1)")
	fs.IntVar(&c.Batch, "batch", 0, "messages per publish request (default 1; throughput 100)")
	fs.IntVar(&c.Inflight, "inflight", 0, "batches in flight per stream (default 1; throughput 16)")
	fs.DurationVar(&c.Interval, "interval", time.Second, "ticker: one batch per stream per interval")
	fs.Float64Var(&c.Rate, "rate", 0, "messages per second offered by all streams together, paced per stream (a batch every streams*batch/rate; not for the ticker); 0: as fast as --inflight allows. Give --direct and a gateway run the same rate, below what either reaches, to compare their cost with the same records per Kafka produce request")
	fs.BoolVar(&c.Aggregation, "aggregation", false, "ask the gateway to share producers between streams")
	fs.BoolVar(&c.Direct, "direct", false, "produce straight to --brokers (one franz-go client per stream, as the gateway's own producer), not through --target; with --consume only, consume straight from --brokers (a franz-go group member per member)")
	fs.IntVar(&c.MessageBytes, "size", 100, "bytes of each message's value")
	fs.Var(cliflag.Text(&c.Payload), "payload", "what the values hold: zeros (one value of zero bytes: compresses to nothing), text (JSON-like events, different per message: compresses as such records do) or random (different per message: does not compress)")
	fs.StringVar(&c.Compression, "compression", "", "ask the gateway for this codec of the streams' batches in Kafka: none, gzip, snappy, lz4 or zstd (default: the gateway's --compression)")
	fs.DurationVar(&c.Warmup, "warmup", time.Second, "publishing before the measured window (0: none)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "the measured window")
	fs.IntVar(&c.Groups, "groups", 0, "consumer groups that must each receive every acked message")
	fs.IntVar(&c.Members, "members", 1, "members per group, each on a connection of its own")
	fs.IntVar(&c.SubBatch, "sub-batch", 0, "messages per subscribe batch (gateway default 100)")
	fs.IntVar(&c.MaxUnacked, "max-unacked", 0, "delivered but unacked messages per member (gateway default 1000)")
	fs.DurationVar(&c.ProcessDelay, "delay", 0, "processing time per received batch, before its ack")
	fs.StringVar(&consume, "consume", "concurrent", "concurrent (while publishing: end-to-end latency), after (once publishing ended) or only (publish nothing: drain what --topic holds; needs --brokers)")
	// Nacks and dead letters (nack.go, deadletter.go).
	fs.Float64Var(&c.NackFraction, "nack-fraction", 0, "each member nacks this fraction (0 to 1) of the messages on their first delivery, chosen by a hash of the message's ID, and acks them when they come again")
	fs.DurationVar(&c.NackDelay, "nack-delay", 0, "the delay each nack asks for before the message comes again (0: at once; the gateway cuts it to its --max-nack-delay)")
	fs.IntVar(&c.PoisonKeys, "poison-keys", 0, fmt.Sprintf("this many published messages (one in %d of the first, spread over the streams) are poison: nacked at every delivery, so they must end in the dead-letter topic; needs --max-deliveries", poisonStride))
	fs.IntVar(&c.MaxDeliveries, "max-deliveries", 0, "ask the gateway to dead-letter a message nacked at its Nth delivery (x-databus-max-deliveries), and verify the dead-letter topic straight from Kafka (needs --brokers): each message once across the topic and it, every dead letter at delivery N")
	fs.StringVar(&c.DeadLetterTopic, "dead-letter-topic", "", "with --max-deliveries: the dead-letter topic (default <topic>.dlq; created with --brokers when missing)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 30*time.Second, "after publishing, how long groups may take to receive everything, and longer while messages still arrive (up to 4 times as long: a topic filled faster than it drains); what is missing then is lost")
	fs.StringVar(&c.GatewayMetrics, "gateway-metrics", "", "the gateway's /metrics URL: report its RSS per open idle stream")
	fs.DurationVar(&c.Settle, "settle", 2*time.Second, "with --gateway-metrics: idle time before reading the RSS")
	fs.DurationVar(&c.KillEvery, "kill-every", 0, "inject a fault every D (see --fault-phase): SIGKILL the gateway of --gateway-cmd (and start it again), run --fault-cmd, or --drop-member")
	fs.IntVar(&c.MaxFaults, "max-faults", 0, "with --kill-every: stop after this many faults (0: no limit)")
	phase := fs.String("fault-phase", "publish", "when --kill-every's faults fall: publish (while publishing) or consume (while --consume after members drain the topic)")
	fs.BoolVar(&c.DropMember, "drop-member", false, "with --kill-every: each fault resets the TCP connection of a member holding a batch it has not acked; it subscribes again as a new member")
	fs.StringVar(&c.GatewayCmd, "gateway-cmd", "", "run the gateway: its command line (sh -c), serving --target; started before the run, stopped after it")
	fs.StringVar(&c.FaultCmd, "fault-cmd", "", "with --kill-every: a command (sh -c) that injects the fault itself, e.g. kill -9 of a gateway a supervisor restarts")
	fs.DurationVar(&c.StartTimeout, "start-timeout", 30*time.Second, "how long the gateway of --gateway-cmd may take to serve, and --fault-cmd to run")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fs.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	cpuProfile := fs.String("cpuprofile", "", "write the checker's own CPU profile to FILE (is the checker the bottleneck?)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "databus-checker: unexpected argument %q (flags only; see --help)\n", fs.Arg(0))
		return 2
	}
	c.Scenario, c.Consume, c.FaultPhase = Scenario(scen), ConsumeMode(consume), FaultPhase(*phase)
	if c.Payload == "" {
		c.Payload = Zeros
	}
	if c.Warmup == 0 {
		c.Warmup = -1 // none, as asked (Config's zero is the default)
	}
	if *share {
		c.Connections = 1
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "databus-checker: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "databus-checker: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress Progress
	if !quiet {
		progress = func(format string, args ...any) { fmt.Fprintf(stderr, "databus-checker: "+format+"\n", args...) }
		c.GatewayLog = stderr
		// A program running the checker as a process of its own (the lab)
		// reads these lines to sample its CPU over the window alone.
		c.OnWindow = func(open bool) {
			if open {
				fmt.Fprintln(stderr, WindowOpenLine)
			} else {
				fmt.Fprintln(stderr, WindowClosedLine)
			}
		}
	}
	res, err := Run(ctx, c, progress)
	if res != nil {
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(res)
		} else {
			res.WriteText(stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "databus-checker: %v\n", err)
		if errors.Is(err, ErrConfig) {
			return 2
		}
		return 1
	}
	if !res.OK() {
		return 1
	}
	return 0
}
