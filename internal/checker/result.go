package checker

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is what a run measured; its JSON is the checker's --json output.
type Result struct {
	Scenario Scenario `json:"scenario"`
	Target   string   `json:"target"`
	Topic    string   `json:"topic,omitempty"` // the one topic; with several, Topics
	// Topics are the topics of a run over several (Config.Topics), each
	// with its streams and the messages Kafka acked on them.
	Topics      []TopicFigs `json:"topics,omitempty"`
	Streams     int         `json:"streams"`
	Connections int         `json:"connections"`
	Batch       int         `json:"batch"`
	Inflight    int         `json:"inflight"`
	Aggregation bool        `json:"aggregation"`
	// Direct: the messages went straight to Kafka, or with Consume Only
	// came straight from it (Target is then the brokers), not through a
	// gateway.
	Direct       bool    `json:"direct,omitempty"`
	MessageBytes int     `json:"message_bytes"`
	Payload      Payload `json:"payload"`
	Compression  string  `json:"compression,omitempty"` // asked of the gateway; empty: its default
	IntervalS    float64 `json:"interval_s,omitempty"`  // ticker
	// Rate is the messages per second offered (Config.Rate); 0: as
	// fast as the in-flight limit allowed.
	Rate        float64 `json:"rate,omitempty"`
	WarmupS     float64 `json:"warmup_s"`
	DurationS   float64 `json:"duration_s"` // the measured window
	OpenSeconds float64 `json:"open_s"`     // opening every stream, first message answered

	// Acked and Failed count every message of the run, warm-up included.
	Acked  int64 `json:"acked"`
	Failed int64 `json:"failed"`
	// MsgsPerSec and BatchesPerSec are acked messages and answered
	// batches per second of the measured window (batches sent and answered
	// in it).
	MsgsPerSec    float64 `json:"msgs_per_s"`
	BatchesPerSec float64 `json:"batches_per_s"`
	// PublishCPUS is the checker process's own CPU (user+system seconds,
	// getrusage) from the start of the run until publishing ended: opening
	// the streams, the warm-up and the window, and concurrent consumers if
	// any. With Direct it is the producers' cost, beside Acked.
	PublishCPUS float64 `json:"publish_cpu_s"`
	// ProduceRequests (Direct only) counts the Produce requests the
	// producers wrote to Kafka in the measured window: with MsgsPerSec,
	// the records per request, which a gateway's run shows in its
	// databus_kafka_requests_total.
	ProduceRequests int64 `json:"kafka_produce_requests,omitempty"`
	// ConsumeCPUS, with Direct and Consume Only, is the checker process's
	// own CPU over the drain (Config.OnWindow's window, the members'
	// joining and leaving included): the direct consumers' cost, beside
	// Delivery.Received.
	ConsumeCPUS float64 `json:"consume_cpu_s,omitempty"`
	// PublishLatency is per batch: sent to answered (Kafka stored it).
	PublishLatency Latencies `json:"publish_latency_ms"`
	// E2ELatency is per message: sent to received by a consumer (concurrent
	// consumers only; messages sent in the measured window).
	E2ELatency *Latencies `json:"e2e_latency_ms,omitempty"`
	// Errors counts failed messages and broken streams by gRPC status.
	Errors   map[string]int64 `json:"errors"`
	Delivery *Delivery        `json:"delivery,omitempty"`
	Gateway  *GatewayMemory   `json:"gateway,omitempty"`
	// KillEveryS and Faults are the faults asked for (Config.KillEvery)
	// and those injected, in order.
	KillEveryS float64    `json:"kill_every_s,omitempty"`
	Faults     []Fault    `json:"faults,omitempty"`
	FaultPhase FaultPhase `json:"fault_phase,omitempty"`
}

// Delivery is the verification: did every group get every acked message?
type Delivery struct {
	Groups  int         `json:"groups"`
	Members int         `json:"members"`
	Consume ConsumeMode `json:"consume"`
	// Acked messages each group had to receive (Consume Only: the
	// records the topic held when the run started).
	Acked int64 `json:"acked"`
	// Lost sums, over groups, acked messages a group never received (a
	// message is received once the member that got it acked it).
	Lost int64 `json:"lost"`
	// Duplicates sums, over groups, messages received more than once.
	Duplicates int64 `json:"duplicates"`
	// UnackedReceived are messages received whose publish failed or was
	// never answered (stored anyway: allowed).
	UnackedReceived int64 `json:"unacked_received"`
	// Other messages in the topic, from earlier runs, skipped.
	Others int64 `json:"others_skipped"`
	// Received counts every receipt the member acked (all groups,
	// duplicates included);
	// ReceivedPerSec divides it by the consuming time (concurrent: the
	// whole run; after and only: from the consumers' start until every
	// group had everything or the drain timed out).
	Received       int64   `json:"received"`
	ReceivedPerSec float64 `json:"received_per_s"`
	// Cycles are get-ack cycles: batches received, processed and acked.
	Cycles       int64   `json:"cycles"`
	CyclesPerSec float64 `json:"cycles_per_s"`
	// DrainS is how long, after publishing ended (Consume Only: after the
	// members started), the groups took to have everything (or the drain
	// timeout).
	DrainS float64 `json:"drain_s"`
	// Nacked counts the nacks members sent (Config.NackFraction and
	// PoisonKeys); Redelivered the deliveries of a message with a
	// delivery count above 1: a nacked message coming again is expected,
	// not a duplicate.
	Nacked      int64 `json:"nacked"`
	Redelivered int64 `json:"redelivered"`
	// DeadLetters is the dead-letter topic's side, with
	// Config.MaxDeliveries.
	DeadLetters *DeadLetterFigs `json:"dead_letters,omitempty"`
	PerGroup    []GroupFigs     `json:"per_group"`
	Sample      []string        `json:"lost_sample,omitempty"` // stream/seq of some lost messages
}

// DeadLetterFigs verifies the dead-letter topic, read straight from
// Kafka: each message is counted once across the topic (received) and
// it (dead-lettered), per group. Sums over groups.
type DeadLetterFigs struct {
	Topic         string `json:"topic"`
	MaxDeliveries int    `json:"max_deliveries"`
	// Poison messages published (acked by Kafka), which every group must
	// dead-letter (Config.PoisonKeys); the poison messages a group did not
	// dead-letter are in Delivery.Lost.
	Poison int64 `json:"poison"`
	// DeadLettered are the distinct messages groups dead-lettered.
	DeadLettered int64 `json:"dead_lettered"`
	// Duplicates are messages dead-lettered and received too, and dead
	// letters of a message dead-lettered already (the gateway died between
	// the write and its commit: allowed, at least once).
	Duplicates int64 `json:"duplicates"`
	// Wrong are messages dead-lettered that are not poison: nacked ones
	// must be acked when they come again, before MaxDeliveries.
	Wrong int64 `json:"wrong"`
	// DeliveryCounts counts the dead letters by their delivery count
	// header: every one must be MaxDeliveries.
	DeliveryCounts map[string]int64 `json:"delivery_counts"`
	// Others are dead letters of other runs or groups, skipped;
	// Malformed ones without a delivery count.
	Others    int64 `json:"others_skipped"`
	Malformed int64 `json:"malformed"`
}

// OffCount is how many dead letters have a delivery count other than
// MaxDeliveries.
func (f *DeadLetterFigs) OffCount() int64 {
	var n int64
	for k, v := range f.DeliveryCounts {
		if k != strconv.Itoa(f.MaxDeliveries) {
			n += v
		}
	}
	return n
}

// OK reports whether the dead letters are as they must be: none wrong,
// none malformed, every one at MaxDeliveries.
func (f *DeadLetterFigs) OK() bool {
	return f == nil || f.Wrong == 0 && f.Malformed == 0 && f.OffCount() == 0
}

// GroupFigs is one group's delivery.
type GroupFigs struct {
	Group      string `json:"group"`
	Received   int64  `json:"received"` // distinct
	Lost       int64  `json:"lost"`
	Duplicates int64  `json:"duplicates"`
}

// TopicFigs is one topic's share of a run over several.
type TopicFigs struct {
	Topic   string `json:"topic"`
	Streams int    `json:"streams"`
	Acked   int64  `json:"acked"`
}

// topicFigures lists each topic's streams and acked messages, when the
// run had several topics.
func (r *Result) topicFigures(c *Config, led *ledger) {
	if len(c.Topics) < 2 {
		return
	}
	r.Topic = ""
	r.Topics = make([]TopicFigs, len(c.Topics))
	for t, name := range c.Topics {
		r.Topics[t].Topic = name
	}
	for i := range c.Streams {
		f := &r.Topics[i%len(c.Topics)]
		f.Streams++
		f.Acked += led.ackedOf(i)
	}
}

// GatewayMemory is the gateway's RSS before the streams opened and once
// they were open and idle.
type GatewayMemory struct {
	RSSBeforeMB float64 `json:"rss_before_mb"`
	RSSOpenMB   float64 `json:"rss_open_mb"`
	KBPerStream float64 `json:"rss_kb_per_stream"`
}

func newResult(c *Config) *Result {
	if c.Consume == Only { // no publishers
		r := &Result{Target: c.Target, Topic: c.Topics[0], Errors: map[string]int64{}, KillEveryS: c.KillEvery.Seconds()}
		if c.Direct {
			r.Direct, r.Target = true, strings.Join(c.Brokers, ",")
		}
		if c.KillEvery > 0 {
			r.FaultPhase = c.FaultPhase
		}
		return r
	}
	conns := c.Connections
	if conns == 0 || conns > c.Streams {
		conns = c.Streams
	}
	r := &Result{
		Scenario: c.Scenario, Target: c.Target, Topic: c.Topics[0], Streams: c.Streams, Connections: conns,
		Batch: c.Batch, Inflight: c.Inflight, Aggregation: c.Aggregation, MessageBytes: c.MessageBytes, Payload: c.Payload, Compression: c.Compression,
		WarmupS: c.Warmup.Seconds(), DurationS: c.Duration.Seconds(), Errors: map[string]int64{},
	}
	if c.Direct {
		r.Direct, r.Target = true, strings.Join(c.Brokers, ",")
	}
	if c.Scenario == Ticker {
		r.IntervalS = c.Interval.Seconds()
	}
	r.Rate = c.Rate
	if c.Scenario == Echo {
		r.Topic = ""
	}
	r.KillEveryS = c.KillEvery.Seconds()
	if c.KillEvery > 0 {
		r.FaultPhase = c.FaultPhase
	}
	return r
}

func (r *Result) publishFigures(p *publishers, d time.Duration) {
	r.Acked, r.Failed = p.acked.Load(), p.failed.Load()
	r.MsgsPerSec = float64(p.windowMsgs.Load()) / d.Seconds()
	r.BatchesPerSec = float64(p.windowBatches.Load()) / d.Seconds()
	r.PublishLatency = p.lat.summary()
}

// sampleMax bounds the lost IDs listed.
const sampleMax = 10

func (r *Result) deliveryFigures(led *ledger, c *consumers, consuming, drain time.Duration) {
	d := &Delivery{
		Groups: c.cfg.Groups, Members: c.cfg.Members, Consume: c.cfg.Consume,
		Acked: led.ackedCount(), Others: c.others.Load(),
		Received: c.received.Load(), Cycles: c.cycles.Load(),
		DrainS: drain.Seconds(),
	}
	if s := consuming.Seconds(); s > 0 {
		d.ReceivedPerSec = float64(d.Received) / s
		d.CyclesPerSec = float64(d.Cycles) / s
	}
	d.Nacked, d.Redelivered = c.nacked.Load(), c.redelivered.Load()
	if c.cfg.deadLetters() {
		d.DeadLetters = &DeadLetterFigs{Topic: c.cfg.DeadLetterTopic, MaxDeliveries: c.cfg.MaxDeliveries,
			Poison: led.poisonCount() * int64(c.cfg.Groups), DeliveryCounts: map[string]int64{}}
	}
	for g := range c.cfg.Groups {
		rep := led.check(g, sampleMax)
		if f := d.DeadLetters; f != nil {
			f.DeadLettered += rep.deadLettered
			f.Duplicates += rep.deadDuplicates
			f.Wrong += rep.deadWrong
			for n, k := range rep.deadCounts {
				f.DeliveryCounts[strconv.FormatUint(uint64(n), 10)] += k
			}
		}
		d.Lost += rep.lost
		d.Duplicates += rep.duplicates
		d.UnackedReceived += rep.unackedReceived
		d.PerGroup = append(d.PerGroup, GroupFigs{Group: c.group(g), Received: rep.received, Lost: rep.lost, Duplicates: rep.duplicates})
		for _, id := range rep.sample {
			if len(d.Sample) < sampleMax {
				d.Sample = append(d.Sample, id.String())
			}
		}
	}
	if c.cfg.Consume == Concurrent {
		e := c.e2e.summary()
		r.E2ELatency = &e
	}
	r.Delivery = d
}

// OK reports whether the run lost nothing: every acked message reached
// every group (true when no groups verified anything), and every fault
// asked for was injected.
func (r *Result) OK() bool {
	for _, f := range r.Faults {
		if f.Error != "" {
			return false
		}
	}
	if r.KillEveryS > 0 && len(r.Faults) == 0 {
		return false // faults were asked for and none fell in their phase
	}
	return r.Delivery == nil || r.Delivery.Lost == 0 && r.Delivery.DeadLetters.OK()
}

// WriteText writes a summary for people.
func (r *Result) WriteText(w io.Writer) {
	var b strings.Builder
	if d := r.Delivery; d != nil && d.Consume == Only {
		fmt.Fprintf(&b, "databus-checker: consume only against %s, topic %s (nothing published)\n", r.Target, r.Topic)
		if r.Direct {
			b.WriteString("  straight from Kafka, no gateway: a franz-go group member per member\n")
		}
	} else {
		r.writePublish(&b)
	}
	if d := r.Delivery; d != nil {
		fmt.Fprintf(&b, "consume:   %d group(s) x %d member(s), %s: %s msgs/s, %s get-ack cycles/s\n",
			d.Groups, d.Members, d.Consume, num(d.ReceivedPerSec), num(d.CyclesPerSec))
		verdict, what := "OK: every acked message reached every group", "acked message(s)"
		if d.Consume == Only {
			verdict, what = "OK: every record the topic held reached every group", "record(s) (partition/offset)"
		}
		if d.Lost > 0 {
			verdict = fmt.Sprintf("FAILED: %d %s never received (first: %s)", d.Lost, what, strings.Join(d.Sample, ", "))
		}
		fmt.Fprintf(&b, "delivery:  %s\n  %d acked, %d lost, %d duplicates, %d received without an ack, %d older messages skipped; drained in %.2fs\n",
			verdict, d.Acked, d.Lost, d.Duplicates, d.UnackedReceived, d.Others, d.DrainS)
		if d.Nacked+d.Redelivered > 0 {
			fmt.Fprintf(&b, "  %d nacked, %d redelivered (expected after a nack: not duplicates)\n", d.Nacked, d.Redelivered)
		}
		if f := d.DeadLetters; f != nil {
			r.writeDeadLetters(&b, f)
		}
		if r.Direct && d.Consume == Only && d.Received > 0 {
			fmt.Fprintf(&b, "  consumers' CPU: %.2f s, %.2f µs per received message (this process, over the drain)\n", r.ConsumeCPUS, r.ConsumeCPUS/float64(d.Received)*1e6)
		}
	} else if r.Scenario == Echo {
		b.WriteString("delivery:  not verified (echo mode has no Kafka)\n")
	} else {
		b.WriteString("delivery:  not verified (no consumer groups; give --groups)\n")
	}
	if r.KillEveryS > 0 {
		r.writeFaults(&b)
	}
	if len(r.Errors) > 0 {
		keys := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Errors[k]))
		}
		fmt.Fprintf(&b, "errors:    %s\n", strings.Join(parts, ", "))
	} else {
		b.WriteString("errors:    none\n")
	}
	io.WriteString(w, b.String())
}

// writePublish writes what the publishers did, and the gateway's memory.
func (r *Result) writePublish(b *strings.Builder) {
	agg := "off"
	if r.Aggregation {
		agg = "on"
	}
	fmt.Fprintf(b, "databus-checker: %s against %s", r.Scenario, r.Target)
	if r.Direct {
		b.WriteString(" (straight to Kafka, no gateway)")
	}
	if r.Topic != "" {
		fmt.Fprintf(b, ", topic %s", r.Topic)
	}
	if len(r.Topics) > 0 {
		fmt.Fprintf(b, ", %d topics:", len(r.Topics))
		for _, t := range r.Topics {
			fmt.Fprintf(b, " %s (%d stream(s), %d acked)", t.Topic, t.Streams, t.Acked)
		}
	}
	fmt.Fprintf(b, "\n  %d stream(s) on %d connection(s), batch %d, %d in flight, aggregation %s, %d-byte values (%s)",
		r.Streams, r.Connections, r.Batch, r.Inflight, agg, r.MessageBytes, r.Payload)
	if r.Compression != "" {
		fmt.Fprintf(b, ", compression %s", r.Compression)
	}
	if r.Scenario == Ticker {
		fmt.Fprintf(b, ", one batch per %gs per stream", r.IntervalS)
	}
	fmt.Fprintf(b, "\n  streams opened in %.2fs; warm-up %gs, measured %gs\n", r.OpenSeconds, r.WarmupS, r.DurationS)
	fmt.Fprintf(b, "publish:   %s msgs/s (%s batches/s); %d acked, %d failed\n", num(r.MsgsPerSec), num(r.BatchesPerSec), r.Acked, r.Failed)
	if r.Rate > 0 {
		fmt.Fprintf(b, "  offered: %s msgs/s\n", num(r.Rate))
	}
	if r.Direct && r.Acked > 0 {
		fmt.Fprintf(b, "  producers' CPU: %.2f s, %.2f µs per acked message (this process, warm-up included)\n", r.PublishCPUS, r.PublishCPUS/float64(r.Acked)*1e6)
	}
	if r.ProduceRequests > 0 {
		fmt.Fprintf(b, "  Kafka produce requests in the window: %d, %.1f records each\n", r.ProduceRequests, r.MsgsPerSec*r.DurationS/float64(r.ProduceRequests))
	}
	fmt.Fprintf(b, "  latency (per batch): %s\n", r.PublishLatency)
	if r.E2ELatency != nil {
		fmt.Fprintf(b, "  end to end (per message): %s\n", *r.E2ELatency)
	}
	if r.Gateway != nil {
		fmt.Fprintf(b, "gateway:   RSS %.1f MB before the streams, %.1f MB with them open and idle: %.1f KB per stream\n",
			r.Gateway.RSSBeforeMB, r.Gateway.RSSOpenMB, r.Gateway.KBPerStream)
	}
}

// writeFaults summarizes the faults injected.
func (r *Result) writeFaults(b *strings.Builder) {
	var at []string
	var failed []string
	kills, down := 0, 0.0
	for _, f := range r.Faults {
		at = append(at, fmt.Sprintf("%.1fs", f.AtS))
		if f.Error != "" {
			failed = append(failed, fmt.Sprintf("at %.1fs: %s", f.AtS, f.Error))
		}
		if f.Kind == faultSigkill && f.Error == "" {
			kills++
			down += f.DownS
		}
	}
	what := "faults"
	if len(r.Faults) > 0 {
		what = faultWhat[r.Faults[0].Kind]
	}
	phase := "while publishing"
	if r.FaultPhase == ConsumePhase {
		phase = "while the consumers drained the topic"
	}
	fmt.Fprintf(b, "faults:    %d %s, one every %gs %s (at %s)", len(r.Faults), what, r.KillEveryS, phase, strings.Join(at, ", "))
	if kills > 0 {
		fmt.Fprintf(b, "; serving again %.2fs after a kill on average", down/float64(kills))
	}
	b.WriteString("\n")
	if len(r.Faults) == 0 {
		b.WriteString("  FAILED: no fault was injected: the phase ended before the first one; make the run longer or --kill-every shorter\n")
	}
	for _, f := range failed {
		fmt.Fprintf(b, "  FAILED: %s\n", f)
	}
}

func (l Latencies) String() string {
	if l.Count == 0 {
		return "none measured"
	}
	return fmt.Sprintf("p50 %s, p99 %s, p99.9 %s, max %s ms (mean %s, n=%d)",
		ms3(l.P50), ms3(l.P99), ms3(l.P999), ms3(l.Max), ms3(l.Mean), l.Count)
}

func ms3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// num formats a rate with thousands separators.
func num(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

// writeDeadLetters summarizes the dead-letter topic's verification.
func (r *Result) writeDeadLetters(b *strings.Builder, f *DeadLetterFigs) {
	verdict := fmt.Sprintf("OK: every dead letter at delivery %d, none that should not be", f.MaxDeliveries)
	if missing := f.Poison - (f.DeadLettered - f.Wrong); missing > 0 {
		verdict = fmt.Sprintf("FAILED: %d poison message(s) not dead-lettered (counted lost)", missing)
	}
	if !f.OK() {
		verdict = fmt.Sprintf("FAILED: %d not poison, %d at another delivery count than %d, %d without one", f.Wrong, f.OffCount(), f.MaxDeliveries, f.Malformed)
	}
	counts := make([]string, 0, len(f.DeliveryCounts))
	for _, k := range slices.Sorted(maps.Keys(f.DeliveryCounts)) {
		counts = append(counts, fmt.Sprintf("%s: %d", k, f.DeliveryCounts[k]))
	}
	fmt.Fprintf(b, "dead letters (%s): %s\n  %d poison (all groups), %d dead-lettered, %d duplicates, %d of other runs skipped; by delivery count {%s}\n",
		f.Topic, verdict, f.Poison, f.DeadLettered, f.Duplicates, f.Others, strings.Join(counts, ", "))
}
