package databusexp

// The report's thousands of quiet clients (the checker's ticker: one
// message per interval on each stream, at a random phase): publish
// latency at 1,000 connections with and without aggregation, a message a
// second each, and at 10,000 with it, a message every 30 s each, the
// report's interval for that test, where it saw p99 around 300 ms before
// it aggregated producers; and its lesson that idle connection timeouts
// caused seconds-long spikes, as franz-go's ConnIdleTimeout on the
// gateway's per-stream producers (--kafka-conn-idle-timeout) shorter
// than the interval between a stream's messages, against the default.

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

const (
	// tickerInterval is the ticker's period as the report describes it,
	// quietInterval the one it set for 10,000 connections "so as not to
	// be distracted by the speed of processing the messages".
	tickerInterval = time.Second
	quietInterval  = 30 * time.Second
	// tickerMinMsgs is the least a ticker row's window must see: a p99
	// of 30 messages. At 10,000 streams every 30 s that is 9 s.
	tickerMinMsgs = 3000
	// The report's figures at 10k connections: its gateway's p99 before
	// aggregation, and Kafka's own p99 beside it.
	reportTickerP99 = 300.0
	reportKafkaP99  = 35.0
	// The idle-timeout pair: streams that each send a message every
	// idleInterval, through producers of their own (aggregation off:
	// the shared producer is never idle), the timeout shortIdle or
	// franz-go's default.
	idleStreams  = 500
	idleInterval = 2 * time.Second
	shortIdle    = time.Second
)

// tickerRow is a ticker row: conns streams, each sending a message
// every interval, aggregated or not.
type tickerRow struct {
	conns    int
	agg      bool
	interval time.Duration
}

// offered is the messages per second the row's streams send together.
func (t tickerRow) offered() float64 { return float64(t.conns) / t.interval.Seconds() }

// window is the row's measured run: the mode's ticker run, longer where
// the streams send fewer than tickerMinMsgs in it.
func (t tickerRow) window(run time.Duration) time.Duration {
	need := time.Duration(float64(tickerMinMsgs) / t.offered() * float64(time.Second))
	return max(run, need.Round(time.Second))
}

// The ticker rows, each on a gateway of its own; 10,000 connections
// without aggregation is not rerun (see figures).
var (
	tickerOff   = tickerRow{1000, false, tickerInterval}
	tickerOn    = tickerRow{1000, true, tickerInterval}
	tickerQuiet = tickerRow{10000, true, quietInterval}
	tickerRows  = []tickerRow{tickerOff, tickerOn, tickerQuiet}
)

// idleTimeouts are the idle-timeout pair's Kafka connection idle
// timeouts: shorter than the interval between a stream's messages, and
// franz-go's default.
var idleTimeouts = []time.Duration{shortIdle, gateway.DefaultConnIdleTimeout}

// dialSeries counts the Kafka connections the gateway opened: franz-go
// sends ApiVersions first on each.
var dialSeries = lab.Counter{Metric: kafkaDials, Name: "databus_kafka_requests_total", Labels: map[string]string{"api": "ApiVersions"}}

func tickerEstimate(o lab.Options, t timing) time.Duration {
	run, _ := o.MinRun()
	r := time.Duration(o.Repeats())
	var d time.Duration
	for _, tr := range tickerRows {
		open := 5 * time.Second // 1,000 connections
		if tr.conns >= 10000 {
			open = 20 * time.Second
		}
		d += r * (max(tr.window(t.tickerRun), run) + open)
	}
	return d + time.Duration(2*idleRounds(o))*(max(t.idleRun, run)+5*time.Second) + 10*time.Second
}

func idleRounds(o lab.Options) int {
	if o.Mode == lab.Full {
		return lab.DefaultMinRounds
	}
	return 1
}

// verified has every message of a ticker run verified by a consumer
// group that reads once publishing ended.
func (b *bench) verified(c checker.Config) checker.Config {
	c.Brokers, c.Partitions, c.Kafka = b.k.Brokers, partitions, b.k.Security
	c.Groups, c.Members, c.Consume, c.SubBatch, c.DrainTimeout = 1, 2, checker.After, 100, time.Minute
	return c
}

// ticker adds the ticker rows, each on a gateway of its own, then the
// idle-timeout pair.
func (b *bench) ticker(ctx context.Context) error {
	for _, t := range tickerRows {
		row, err := b.tickerRow(ctx, t)
		if err != nil {
			return err
		}
		b.run.AddRow(row)
	}
	return b.idleTimeoutRows(ctx)
}

// tickerRow measures one ticker row on a gateway of its own, so that
// its RSS is its own (1,000 producers stay in a heap after their streams
// end).
func (b *bench) tickerRow(ctx context.Context, t tickerRow) (*labresult.Row, error) {
	o := onKafka(b.k)
	// A stream without aggregation has a producer of its own, and the
	// group verifying delivery a member.
	o.MaxKafkaClients = t.conns + 100
	g, err := b.run.StartGateway(ctx, gatewayCPU, gatewayMemMB, o)
	if err != nil {
		return nil, err
	}
	defer g.Stop()
	// A second of ticks before the window: at a second's interval every
	// stream ticks once, answered; at 30 s the streams' random phases
	// spread their ticks evenly from the start, so the window sees as
	// many a second as later ones would.
	cfg := b.verified(checker.Config{Target: g.GRPC, Topic: b.topic(), Scenario: checker.Ticker, Streams: t.conns,
		Interval: t.interval, Aggregation: t.agg, Warmup: time.Second})
	// No warm-up run: each run opens its streams, each carrying a first
	// message, answered, before the ticks start.
	row, err := b.run.Measure(ctx, lab.Measurement{Key: tickerKey(t), Procs: []*sandbox.Process{g.Proc},
		Duration: t.window(b.t.tickerRun), NoWarmup: true, Driver: Checker{Config: cfg, Metrics: g.URL("/metrics"), Gateway: g.Proc}})
	if err != nil {
		return nil, err
	}
	tickerNote(row, t)
	return row, nil
}

// tickerNote says what a ticker row measured, the report's figures
// beside it.
func tickerNote(row *labresult.Row, t tickerRow) {
	row.AddNote("publish latency per message, sent to stored in Kafka (a message per %v per stream, one in flight)", t.interval)
	publishNote(row)
	// A ticker's rate is fixed by its streams: short of it, the latencies
	// are a saturated system's (the gateway's or the checker's, which
	// shares the machine), not a quiet one's.
	if offered := t.offered(); row.RPS != nil && *row.RPS < 0.9*offered {
		row.AddNote("SATURATED: %s msgs/s acked of the %s offered, so these latencies include queueing (the gateway used %s cores; the checker, in the lab's process, shares the machine)",
			thousands(int(*row.RPS)), thousands(int(offered)), cores(row.CPUAvg))
	}
	if t.interval == quietInterval {
		row.AddNote("at the report's interval the %s streams offer %s messages/s in all: what the gateway carries is the open streams, not their messages", thousands(t.conns), thousands(int(t.offered())))
	}
	if t.conns >= 10000 {
		row.AddNote("the report at 10k connections, a message per 30 s each: p99 ~%.0f ms before aggregation (Kafka's own p99 ~%.0f ms), lower after it (no figure given)", reportTickerP99, reportKafkaP99)
	}
	if t.agg {
		row.AddNote("aggregated streams wait up to the shared producer's linger (%v) for others' messages", aggregationLinger)
	}
}

// idleTimeoutRows measures the idle-timeout pair in rounds, each on a
// gateway of its own, and notes the Kafka connections each dialed.
func (b *bench) idleTimeoutRows(ctx context.Context) error {
	var ms []lab.Measurement
	for _, idle := range idleTimeouts {
		o := onKafka(b.k)
		o.ConnIdleTimeout = idle
		g, err := b.run.StartGateway(ctx, gatewayCPU, gatewayMemMB, o)
		if err != nil {
			return err
		}
		defer g.Stop()
		cfg := b.verified(checker.Config{Target: g.GRPC, Topic: b.topic(), Scenario: checker.Ticker, Streams: idleStreams,
			Interval: idleInterval, Warmup: idleInterval})
		dials := dialSeries
		dials.URL = g.URL("/metrics")
		ms = append(ms, lab.Measurement{Key: idleTimeoutKey(idle), Procs: []*sandbox.Process{g.Proc}, Duration: b.t.idleRun,
			NoWarmup: true, Counters: []lab.Counter{dials}, Driver: Checker{Config: cfg, Metrics: dials.URL, Gateway: g.Proc}})
	}
	n := idleRounds(b.run.Opts)
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms, MinRounds: n, MaxRounds: n})
	if err != nil {
		return err
	}
	for _, row := range rows {
		dialed := row.Value(kafkaDials) / float64(max(row.Runs, 1))
		row.AddNote("the gateway dialed Kafka %s times per run (streams opening, their producers, the verifying group, and each reconnect after an idle timeout; franz-go reaps a connection idle past the timeout and dials anew on the next request)", thousands(int(dialed)))
		publishNote(row)
	}
	idleTimeoutNote(byKey(rows), b.k.Kind)
	for _, row := range rows {
		b.run.AddRow(row)
	}
	return nil
}

// idleTimeoutNote sets beside the short timeout's latencies the
// default's.
func idleTimeoutNote(rows map[labresult.Key]*labresult.Row, kafka string) {
	short, def := rows[idleTimeoutKey(shortIdle)], rows[idleTimeoutKey(gateway.DefaultConnIdleTimeout)]
	if short.P99MS == nil || def.P99MS == nil || short.MaxMS == nil || def.MaxMS == nil {
		return
	}
	short.AddNote("against the default: p50 %.2f vs %.2f ms, p99 %.2f vs %.2f ms, max %.1f vs %.1f ms; the report saw seconds-long spikes from idle timeouts: with %s on loopback a reconnect is a dial and an ApiVersions exchange, which is what this measures",
		short.Value(labresult.P50MS), def.Value(labresult.P50MS), *short.P99MS, *def.P99MS, *short.MaxMS, *def.MaxMS, kafka)
}

func cores(p *float64) string {
	if p == nil {
		return "unmeasured"
	}
	return fmt.Sprintf("%.2f", *p)
}
