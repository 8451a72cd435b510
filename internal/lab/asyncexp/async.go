// Package async is report A2's experiment: moving a side effect (recording
// a user event) off the request path into Kafka.
//
// The app (hlab serve app: report A1's CPU work, then an event) runs at
// 0.2 CPU and 500 MB, as does the event log (hlab serve eventlog: 1001 ×
// json.Marshal of a 50-char string per event), like the report's
// containers. Rows, closed model with 1 and 3 connections (the report's
// wrk -t1 -c1 and -t3 -c3):
//
//   - sync: the app POSTs each event to the event log and waits;
//   - async, Kafka acked: the app produces each event to Kafka (one
//     partition) and answers once Kafka acknowledged it, as the report's
//     handler did (kafka-go's WriteMessages on a leader connection); the
//     event log consumes it (--consume) as a consumer-group member;
//   - async, buffered: the app answers once the event is buffered for
//     Kafka (franz-go's producer batches in the background): what the
//     pattern buys when the handler need not wait;
//   - databus: the app publishes each event through the databus gateway
//     (report D's architecture; unconstrained, like Kafka) and answers
//     once Kafka stored it; the event log consumes as in async.
//
// Every service runs for the whole experiment; the claims' rows (1
// connection; sync and Kafka acked at 3, the report's second ratio) run
// in rounds, their order alternating. The consumers work
// beside the load as the report's did. After the rows the lab waits for
// each consumer to drain, then compares the events each app answered 200
// for with the events consumed: a difference is data lost, and makes the
// claims on that app's rows INVALID.
package asyncexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/app"
	"github.com/highload-lab/hlab/internal/services/eventlog"
	"github.com/highload-lab/hlab/loadgen"
)

// The report's container limits, for the app and the event log alike.
const (
	svcCPU   = 0.2
	svcMemMB = 500
)

// Modes, as "hlab serve app --mode" takes them.
const (
	modeSync     = string(app.Sync)
	modeKafkaAck = string(app.KafkaAck)
	modeAsync    = string(app.Async)
	modeDatabus  = string(app.Databus)
)

// modes in the order rows are listed, with how a row names each.
var (
	modes     = []string{modeSync, modeKafkaAck, modeAsync, modeDatabus}
	modeNames = map[string]string{
		modeSync:     "sync",
		modeKafkaAck: "async, answered once Kafka acked (the report's)",
		modeAsync:    "async, answered once buffered",
		modeDatabus:  "databus",
	}
	conns = []int{1, 3}
)

// label names a row; the claims refer to them.
func label(mode string, n int) string {
	if n == 1 {
		return modeNames[mode] + ", 1 connection"
	}
	return fmt.Sprintf("%s, %d connections", modeNames[mode], n)
}

// refs are the report's figures (RPS, mean ms): its "async" waited for
// Kafka's ack.
var refs = map[string]*lab.Ref{
	label(modeSync, 1):     ref(56, 28.20),
	label(modeSync, 3):     ref(28, 105.07),
	label(modeKafkaAck, 1): ref(120, 21.24),
	label(modeKafkaAck, 3): ref(87, 40.31),
}

func ref(rps, meanMS float64) *lab.Ref { return &lab.Ref{RPS: lab.F(rps), MeanMS: lab.F(meanMS)} }

// Experiment is report A2's experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

func (*Experiment) Name() string { return "async" }

func (*Experiment) Title() string {
	return "sync to async: recording an event by HTTP vs through Kafka, with zero loss (report A2)"
}

func (*Experiment) Claims() []lab.Claim {
	return []lab.Claim{{
		Text:      "producing the event to Kafka and answering once Kafka acknowledged it (the report's async handler) serves >= 2x the requests per second of posting it to the event log (sync), at 1 connection",
		Metric:    "rps",
		Numerator: label(modeKafkaAck, 1), Denominator: label(modeSync, 1),
		AtLeast: 2,
		Report:  "120 / 56 = 2.14",
	}, {
		Text:      "answering once the event is buffered for Kafka serves >= 2x the requests per second of sync, at 1 connection",
		Metric:    "rps",
		Numerator: label(modeAsync, 1), Denominator: label(modeSync, 1),
		AtLeast: 2,
		Report:  "not measured: the report's handler waited for Kafka",
	}, {
		Text:      "answering once Kafka acknowledged the event serves >= 2x the requests per second of sync, at 3 connections",
		Metric:    "rps",
		Numerator: label(modeKafkaAck, 3), Denominator: label(modeSync, 3),
		AtLeast: 2,
		Report:  "87 / 28 = 3.11",
	}}
}

// timing is a mode's durations.
type timing struct {
	run   time.Duration // one measured run (the report's wrk ran 5 s)
	drain time.Duration // longest wait for a consumer to drain
	stall time.Duration // give up draining when nothing was consumed for this long
}

func timings(o lab.Options) timing {
	if o.Mode == lab.Full {
		return timing{run: 5 * time.Second, drain: 5 * time.Minute, stall: 30 * time.Second}
	}
	return timing{run: 5 * time.Second, drain: 2 * time.Minute, stall: 20 * time.Second}
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	t := timings(o)
	// sync at 1 connection needs about 12 s for 2,000 requests.
	rounds := 4 * (12*time.Second + 2*t.run + time.Second) // the 1-connection claims
	rounds += 4 * (8*time.Second + t.run + time.Second)    // the 3-connection claim
	others := 3 * (o.Warmup() + time.Duration(o.Repeats())*max(t.run, 8*time.Second))
	drains := 20 * time.Second
	start := 8 * time.Second // services, kfake, the gateway
	if o.Kafka == lab.KafkaReal {
		start += 10*time.Second + 4*o.Warmup() // and the JVM's warm-up
	}
	return rounds + others + drains + start
}

// bus is an app that records through Kafka, its topic and its consumer.
type bus struct {
	mode       string
	app, cons  *lab.Service
	topic      string
	before     counts
	rows       []*lab.Row
	k          *lab.Kafka
	steadyWarm bool
}

// Dependencies: Kafka (hlab lab --kafka-brokers).
func (*Experiment) Dependencies() []string { return []string{lab.DepKafka} }

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	t := timings(run.Opts)
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("services", fmt.Sprintf("apps and event log (or its consumers) at %.1f CPU, %d MB each, like the report's containers", svcCPU, svcMemMB))
	run.SetEnv("load", "hlab load, closed model (wrk -tN -cN)")
	run.SetEnv("workload", "GET /handle: 1001 x json.Marshal of a random 10-letter string, then an event (UUID, random 100-char body); the log work: 1001 x json.Marshal of a random 50-char string per event")
	run.SetEnv("topic", "one partition per app, as in the report")
	run.SetEnv("method", "every app and consumer runs for the whole experiment; the claims' rows (1 connection, then sync and the report's async at 3) run in rounds, their order alternating; consumers work beside the load, and drain once the rows are measured")

	el, err := run.StartService(ctx, "eventlog", svcCPU, svcMemMB)
	if err != nil {
		return err
	}
	defer el.Stop()
	syncApp, err := run.StartService(ctx, "app", svcCPU, svcMemMB, app.Config{Mode: app.Sync, EventLog: el.URL("")}.Args()...)
	if err != nil {
		return err
	}
	defer syncApp.Stop()
	k, err := run.StartKafka(ctx, 1)
	if err != nil {
		return err
	}
	defer k.Stop()
	run.SetEnv("kafka", k.Kind)
	gw, err := run.StartGateway(ctx, 0, 0, gateway.Options{Config: gateway.Config{Brokers: k.Brokers}})
	if err != nil {
		return err
	}
	defer gw.Stop()
	run.SetEnv("databus", "hlab serve databus (report D's gateway), unconstrained like Kafka: the bus side")
	buses := map[string]*bus{}
	for _, mode := range []string{modeKafkaAck, modeAsync, modeDatabus} {
		a := app.Config{Mode: app.Mode(mode), Brokers: k.Brokers}
		if mode == modeDatabus {
			a = app.Config{Mode: app.Mode(mode), Databus: gw.GRPC}
		}
		b, err := startBus(ctx, run, k, a)
		if b != nil {
			defer b.stop(ctx)
		}
		if err != nil {
			return err
		}
		buses[mode] = b
	}

	measurement := func(mode string, n int) lab.Measurement {
		m := lab.Measurement{
			Label: label(mode, n), Ref: refs[label(mode, n)], Duration: t.run,
			Load: []loadgen.Option{loadgen.Connections(n)},
		}
		if mode == modeSync {
			m.URL = syncApp.URL("/handle")
			m.Procs = []*sandbox.Process{syncApp.Proc, el.Proc}
			m.Counters = []lab.Counter{
				{Key: "events_recorded", URL: syncApp.URL("/metrics"), Name: "app_events_recorded_total"},
				{Key: "events_failed", URL: syncApp.URL("/metrics"), Name: "app_events_failed_total"},
				{Key: "events_saved", URL: el.URL("/metrics"), Name: "eventlog_http_events_total"},
			}
			return m
		}
		b := buses[mode]
		m.URL = b.app.URL("/handle")
		m.Procs = []*sandbox.Process{b.app.Proc, b.cons.Proc}
		// A JVM broker warms up until its throughput stops climbing.
		m.Steady = k.JVM
		return m
	}
	keep := func(mode string, rows ...*lab.Row) {
		for _, r := range rows {
			if mode == modeSync {
				r.Note = joinNote(r.Note, "cpu and rss: app + event log")
			} else {
				buses[mode].rows = append(buses[mode].rows, r)
			}
		}
	}
	paired, err := run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{
		measurement(modeSync, 1), measurement(modeKafkaAck, 1), measurement(modeAsync, 1),
	}})
	if err != nil {
		return err
	}
	keep(modeSync, paired[0])
	keep(modeKafkaAck, paired[1])
	keep(modeAsync, paired[2])
	paired3, err := run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{
		measurement(modeSync, 3), measurement(modeKafkaAck, 3),
	}})
	if err != nil {
		return err
	}
	keep(modeSync, paired3[0])
	keep(modeKafkaAck, paired3[1])
	others := map[string]*lab.Row{
		label(modeSync, 3):     paired3[0],
		label(modeKafkaAck, 3): paired3[1],
	}
	for _, mode := range modes {
		for _, n := range conns {
			if _, done := others[label(mode, n)]; done || (n == 1 && mode != modeDatabus) {
				continue // measured in rounds above
			}
			row, err := run.Measure(ctx, measurement(mode, n))
			if err != nil {
				return err
			}
			keep(mode, row)
			others[label(mode, n)] = row
		}
	}
	// Delivery: every event answered 200 consumed, per app.
	for _, mode := range []string{modeKafkaAck, modeAsync, modeDatabus} {
		if err := buses[mode].verify(ctx, run, t); err != nil {
			return err
		}
	}
	for _, mode := range modes {
		for _, n := range conns {
			if n == 1 && mode != modeDatabus {
				run.AddRow(paired[map[string]int{modeSync: 0, modeKafkaAck: 1, modeAsync: 2}[mode]])
			} else {
				run.AddRow(others[label(mode, n)])
			}
		}
	}
	return nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// startBus starts the consumer of a new topic and an app a recording to
// it (in a.Mode; startBus sets a.Topic); the caller stops what it
// returns, also with an error.
func startBus(ctx context.Context, run *lab.Run, k *lab.Kafka, a app.Config) (*bus, error) {
	mode := string(a.Mode)
	b := &bus{mode: mode, k: k, topic: k.Topic(fmt.Sprintf("lab-async-%s-%d", mode, time.Now().UnixNano()))}
	if err := k.CreateTopic(ctx, b.topic, 1); err != nil {
		return nil, err
	}
	var err error
	cons := eventlog.Config{Consume: true, Consumer: eventlog.ConsumerConfig{Brokers: k.Brokers, Topic: b.topic, Group: b.topic}}
	b.cons, err = run.StartService(ctx, "eventlog", svcCPU, svcMemMB, cons.Args()...)
	if err != nil {
		return b, err
	}
	a.Topic = b.topic
	b.app, err = run.StartService(ctx, "app", svcCPU, svcMemMB, a.Args()...)
	if err != nil {
		return b, err
	}
	b.before, err = readCounts(ctx, b.app, b.cons)
	return b, err
}

func (b *bus) stop(ctx context.Context) {
	if b.app != nil {
		b.app.Stop()
	}
	if b.cons != nil {
		b.cons.Stop()
	}
	b.k.DeleteTopic(context.WithoutCancel(ctx), b.topic)
}

// verify waits for b's consumer to drain, then records on each of b's rows
// what the app recorded, what Kafka stored and what was consumed: events
// answered 200 and not consumed are lost (Row.Lost, on every row of the
// app, since they share its topic).
func (b *bus) verify(ctx context.Context, run *lab.Run, t timing) error {
	lagEnd, lagErr := b.k.GroupLag(ctx, b.topic)
	run.Progress.Step(modeNames[b.mode]+": waiting for the consumer to drain", time.Duration(lagEnd)*10*time.Millisecond)
	start := time.Now()
	after, drainErr := drain(ctx, b.app, b.cons, b.k, b.topic, t)
	drained := time.Since(start)
	if drainErr != nil && ctx.Err() != nil {
		return drainErr
	}
	f := after.sub(b.before)
	lost := int64(max(0, f.recorded-f.consumed))
	note := fmt.Sprintf("this app's rows: %.0f events answered 200, %.0f stored in Kafka, %.0f consumed, %d lost, %.0f duplicates; consumer lag when the load stopped %d, drained in %.1f s; cpu and rss: app + consumer",
		f.recorded, f.delivered, f.consumed, lost, f.duplicates, lagEnd, drained.Seconds())
	if lagErr != nil {
		note += fmt.Sprintf("; the group's lag could not be read from Kafka: %v", lagErr)
	}
	if drainErr != nil {
		note += "; " + drainErr.Error()
	}
	for _, r := range b.rows {
		if r.Figures == nil {
			r.Figures = map[string]float64{}
		}
		r.Figures["events_recorded"] = f.recorded // answered 200 with the event accepted
		r.Figures["events_failed"] = f.failed     // answered 503
		r.Figures["events_produced"] = f.delivered
		r.Figures["events_consumed"] = f.consumed // duplicates excluded
		r.Figures["events_duplicates"] = f.duplicates
		r.Figures["events_lost_by_app"] = f.lost // accepted, then refused by Kafka for good
		r.Figures["consumer_lag_at_end"] = float64(lagEnd)
		r.Figures["drain_seconds"] = drained.Seconds()
		r.Lost = &lost
		r.Note = joinNote(r.Note, note)
	}
	return nil
}

// counts are the app's and the consumer's counters at one moment.
type counts struct {
	recorded, failed, delivered, lost, pending float64
	consumed, duplicates                       float64
}

func (c counts) sub(o counts) counts {
	return counts{
		recorded: c.recorded - o.recorded, failed: c.failed - o.failed,
		delivered: c.delivered - o.delivered, lost: c.lost - o.lost, pending: c.pending,
		consumed: c.consumed - o.consumed, duplicates: c.duplicates - o.duplicates,
	}
}

func readCounts(ctx context.Context, app, cons *lab.Service) (counts, error) {
	a, err := lab.Scrape(ctx, app.URL("/metrics"))
	if err != nil {
		return counts{}, err
	}
	c, err := lab.Scrape(ctx, cons.URL("/metrics"))
	if err != nil {
		return counts{}, err
	}
	return counts{
		recorded: a["app_events_recorded_total"], failed: a["app_events_failed_total"],
		delivered: a["app_events_delivered_total"], lost: a["app_events_lost_total"], pending: a["app_events_pending"],
		consumed: c["eventlog_consumed_total"], duplicates: c["eventlog_consumer_duplicates_total"],
	}, nil
}

// drain waits until the app has nothing pending, the consumer has
// processed every event the app recorded since both started, and Kafka
// holds the group's commits up to the end; it gives up after t.drain, or
// when nothing was consumed for t.stall, and returns the counts it saw.
func drain(ctx context.Context, app, cons *lab.Service, k *lab.Kafka, group string, t timing) (counts, error) {
	deadline := time.Now().Add(t.drain)
	last, lastChange := -1.0, time.Now()
	for {
		c, err := readCounts(ctx, app, cons)
		if err == nil && c.pending == 0 && c.consumed >= c.recorded {
			lag, lerr := k.GroupLag(ctx, group)
			if lerr == nil && lag == 0 {
				return c, nil
			}
		}
		if err == nil && c.consumed != last {
			last, lastChange = c.consumed, time.Now()
		}
		switch {
		case ctx.Err() != nil:
			return c, ctx.Err()
		case time.Now().After(deadline):
			return c, fmt.Errorf("not drained within %v", t.drain)
		case time.Since(lastChange) > t.stall:
			return c, fmt.Errorf("nothing consumed for %v: gave up draining", t.stall)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var _ lab.Experiment = (*Experiment)(nil)
