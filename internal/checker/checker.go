// Package checker is the load and correctness checker of the databus
// gateway (cmd/databus-checker), after the checker of report D: publish
// scenarios (echo, latency-optimized, throughput-optimized, ticker) and
// consumer groups (G groups x M members, batch size, processing delay).
//
// It reports messages/s, publish latency (request sent to answer) and
// end-to-end latency (sent to received by a consumer) as HdrHistogram
// percentiles, errors by gRPC status, and it verifies delivery: every
// message carries its run, stream, sequence number and send time in a
// header; every message Kafka acknowledged to a publisher must be received
// by every consumer group at least once. A message counts as received
// only once the member that got it acked it: one that arrived and was
// never acked must arrive again, and if it does not (a gateway that
// committed past it) it is lost. Messages acked and never received are
// lost (the run fails); receiving one twice is a duplicate (allowed:
// delivery is at least once, and counted).
//
// Config.Consume Only publishes nothing: fresh groups drain the records a
// topic already holds (from Kafka's start offsets to its end offsets when
// the run starts), each group must receive every one, and the rates and
// Config.OnWindow cover the drain alone, so a caller can read the
// gateway's CPU over consuming and nothing else (bench/databus.sh, the
// lab's subscribe row).
//
// Members may nack (Config.NackFraction: a fraction nacked once, then
// acked; Config.PoisonKeys: messages nacked at every delivery), and with
// Config.MaxDeliveries the gateway dead-letters what is nacked at the Nth
// delivery: the checker reads the dead-letter topic straight from Kafka
// and counts each message once across the topic and it (deadletter.go).
//
// Each stream gets a gRPC connection of its own by default (the report's
// lesson: streams on one connection serialize); Config.Connections spreads
// them over fewer.
//
//	res, err := checker.Run(ctx, checker.Config{
//		Target: "127.0.0.1:7070", Topic: "orders", Scenario: checker.Throughput,
//		Streams: 10, Groups: 2, Members: 3,
//	})
//	if err != nil { ... }
//	res.WriteText(os.Stdout)
//	if !res.OK() { os.Exit(1) }
package checker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/kafkatopic"
	"github.com/highload-lab/hlab/internal/promtext"
)

// Progress receives what the checker is doing, for people; nil is quiet.
type Progress func(format string, args ...any)

// Run runs the scenario cfg describes and returns what it measured. An
// error means the run could not be made (no gateway, unknown topic);
// lost messages are not an error: they are in the Result (see OK).
func Run(ctx context.Context, cfg Config, progress Progress) (*Result, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if err := cfg.secureKafka(ctx); err != nil {
		return nil, err
	}
	if len(cfg.Brokers) > 0 && cfg.Consume != Only {
		topics := cfg.Topics
		if cfg.deadLetters() {
			topics = append(slices.Clip(topics), cfg.DeadLetterTopic)
		}
		if err := ensureTopics(ctx, cfg.Brokers, cfg.kafkaOpts, cfg.Partitions, topics...); err != nil {
			return nil, err
		}
	}
	var gw *gatewayProc
	if cfg.GatewayCmd != "" {
		var err error
		if gw, err = startGateway(ctx, &cfg); err != nil {
			return nil, err
		}
		defer gw.stop()
		progress("gateway started (pid %d): %s", gw.p.PID(), cfg.GatewayCmd)
	}
	// A fault the run cannot go on after (a killed gateway that does not
	// come back) ends it with that cause.
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	if cfg.Consume == Only {
		return consumeOnly(ctx, &cfg, gw, progress, fail)
	}
	cpuStart := ProcessCPU()
	run := rand.Uint64()
	errs := &errorCounts{}
	led := newLedger(cfg.Streams, cfg.Groups)
	if cfg.PoisonKeys > 0 {
		led.setPoison(poisonIDs(cfg.Streams, cfg.PoisonKeys))
	}
	res := newResult(&cfg)
	var dead *deadLetters
	if cfg.deadLetters() && cfg.Groups > 0 {
		var err error
		if dead, err = startDeadLetters(ctx, &cfg, run, led, groupNames(&cfg, run)); err != nil {
			return nil, err
		}
		defer dead.close()
		progress("reading the dead-letter topic %s; %d poison message(s), nacked at every delivery, must end there", cfg.DeadLetterTopic, cfg.PoisonKeys)
	}

	var cons *consumers
	startConsumers := func() error {
		cons = newConsumers(&cfg, run, led, errs)
		return cons.start(ctx)
	}
	defer func() {
		if cons != nil {
			cons.stop()
		}
	}()
	if cfg.Groups > 0 && cfg.Consume == Concurrent {
		if err := startConsumers(); err != nil {
			return nil, err
		}
		progress("%d group(s) x %d member(s) joining", cfg.Groups, cfg.Members)
		if !cons.awaitAssigned(ctx, 15*time.Second) {
			progress("groups still settling after 15s; publishing anyway")
		}
	}

	var rssBefore int64
	if cfg.GatewayMetrics != "" {
		var err error
		if rssBefore, err = GatewayRSS(ctx, cfg.GatewayMetrics); err != nil {
			return nil, err
		}
	}
	pubs := newPublishSide(&cfg, run, led, errs)
	defer pubs.close()
	if cfg.Direct {
		progress("opening %d Kafka producer(s) straight to %v", cfg.Streams, cfg.Brokers)
	} else {
		progress("opening %d stream(s) on %d connection(s)", cfg.Streams, max(1, min(cfg.Streams, connsOr(cfg.Connections, cfg.Streams))))
	}
	openStart := time.Now()
	if err := pubs.open(ctx); err != nil {
		return nil, err
	}
	res.OpenSeconds = time.Since(openStart).Seconds()
	if cfg.GatewayMetrics != "" {
		progress("streams open; idle for %v before reading the gateway's RSS", cfg.Settle)
		select {
		case <-time.After(cfg.Settle):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		after, err := GatewayRSS(ctx, cfg.GatewayMetrics)
		if err != nil {
			return nil, err
		}
		res.Gateway = &GatewayMemory{
			RSSBeforeMB: mb(rssBefore), RSSOpenMB: mb(after),
			KBPerStream: float64(after-rssBefore) / 1024 / float64(cfg.Streams),
		}
	}

	begin := time.Now()
	win := window{start: begin.Add(cfg.Warmup), end: begin.Add(cfg.Warmup + cfg.Duration)}
	if cons != nil {
		cons.win.Store(&win)
	}
	progress("%s: %d stream(s), batch %d, %d in flight, aggregation %v: warm-up %v, then %v measured",
		cfg.Scenario, cfg.Streams, cfg.Batch, cfg.Inflight, cfg.Aggregation, cfg.Warmup, cfg.Duration)
	inj := startInjector(ctx, &cfg, PublishPhase, gw, cons, begin, win.end, progress, fail)
	if cfg.OnWindow != nil {
		done := make(chan struct{})
		opener := time.AfterFunc(time.Until(win.start), func() { cfg.OnWindow(true); close(done) })
		pubs.publish(ctx, begin, win)
		if opener.Stop() { // the run ended before the window opened
			cfg.OnWindow(true)
		} else {
			<-done
		}
		cfg.OnWindow(false)
	} else {
		pubs.publish(ctx, begin, win)
	}
	res.Faults = inj.stop()
	publishEnd := time.Now()
	res.PublishCPUS = ProcessCPU() - cpuStart
	res.publishFigures(pubs.stats(), cfg.Duration)
	if d, ok := pubs.(*direct); ok {
		res.ProduceRequests = d.requests.n.Load()
	}
	res.topicFigures(&cfg, led)

	if cfg.Groups > 0 {
		if cfg.Consume == After {
			if err := startConsumers(); err != nil {
				return nil, err
			}
		}
		drainStart := time.Now()
		drained := drainGroups(ctx, &cfg, gw, cons, led, res, drainStart, progress, fail)
		cons.stop()
		if dead != nil {
			// What the gateway dead-lettered before the members stopped,
			// read to the topic's end: a late duplicate counts too.
			if err := dead.stop(ctx); err != nil {
				return nil, err
			}
		}
		from := begin
		if cfg.Consume == After {
			from = drainStart
		}
		res.deliveryFigures(led, cons, drained.Sub(from), drained.Sub(publishEnd))
		if f := res.Delivery.DeadLetters; f != nil {
			f.Others, f.Malformed = dead.others.Load(), dead.malformed.Load()
		}
		cons = nil // stopped
	}
	res.Errors = errs.snapshot()
	if ctx.Err() != nil {
		return res, context.Cause(ctx)
	}
	return res, nil
}

// drainGroups waits until every group has every acked message, or until
// DrainTimeout after from ends while the groups receive nothing more,
// with the consume phase's faults (into res.Faults), and returns when it
// stopped waiting.
//
// Past DrainTimeout the wait goes on while messages still arrive, for at
// most drainProgressFactor times DrainTimeout in all: publishers that
// fill a topic faster than its groups read it (throughput-optimized ones,
// a million messages a second) leave more than DrainTimeout of reading,
// and a message on its way is not lost. A group that has stopped
// receiving ends the wait at DrainTimeout, as before.
func drainGroups(ctx context.Context, cfg *Config, gw *gatewayProc, cons *consumers, led *ledger, res *Result, from time.Time, progress Progress, fail context.CancelCauseFunc) time.Time {
	progress("waiting up to %v for every group to receive every acked message (longer while messages still arrive, up to %v)", cfg.DrainTimeout, drainProgressFactor*cfg.DrainTimeout)
	deadline := from.Add(cfg.DrainTimeout)
	limit := from.Add(drainProgressFactor * cfg.DrainTimeout)
	inj := startInjector(ctx, cfg, ConsumePhase, gw, cons, from, deadline, progress, fail)
	seen, lastArrival := cons.arrived(), time.Now()
	for !led.complete() && ctx.Err() == nil {
		now := time.Now()
		if n := cons.arrived(); n != seen {
			seen, lastArrival = n, now
		}
		if now.After(limit) || now.After(deadline) && now.Sub(lastArrival) > drainIdle {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	drained := time.Now()
	if inj != nil {
		res.Faults = inj.stop()
	}
	return drained
}

// drainProgressFactor bounds the drain that goes on past DrainTimeout
// while messages still arrive; drainIdle is how long without one ends it.
const (
	drainProgressFactor = 4
	drainIdle           = 2 * time.Second
)

func connsOr(c, streams int) int {
	if c == 0 {
		return streams
	}
	return c
}

// ProcessCPU is this process's user and system CPU seconds (getrusage),
// 0 when the kernel does not say.
func ProcessCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// ensureTopics creates the topics Kafka does not have, of partitions
// partitions each.
func ensureTopics(ctx context.Context, brokers []string, sec []kgo.Opt, partitions int, topics ...string) error {
	cl, err := newKafkaClient(brokers, sec)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second+time.Duration(len(topics))*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	for _, topic := range topics {
		err := kafkatopic.Create(ctx, adm, partitions, topic)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			err = kafkatopic.Await(ctx, adm, topic)
		}
		if err != nil {
			return fmt.Errorf("checker: topic %q at %v: %w", topic, brokers, err)
		}
	}
	return nil
}

// GatewayRSS reads the gateway's resident memory, in bytes, from its
// Prometheus /metrics (process_resident_memory_bytes).
func GatewayRSS(ctx context.Context, metricsURL string) (int64, error) {
	m, err := promtext.Scrape(ctx, http.DefaultClient, metricsURL)
	if err != nil {
		return 0, fmt.Errorf("checker: read the gateway's RSS: %w", err)
	}
	if !m.Has("process_resident_memory_bytes") {
		return 0, fmt.Errorf("checker: %s has no process_resident_memory_bytes (is it the gateway's HTTP address?)", metricsURL)
	}
	return int64(m.Sum("process_resident_memory_bytes", nil)), nil
}
