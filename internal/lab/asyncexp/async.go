// Package asyncexp is report A2's experiment: moving a side effect
// (recording a user event) off the request path into Kafka.
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
//
// Then the report's con, "the bus is one more point of failure", as
// fault rows (faults.go): the Kafka-acked app with its broker SIGKILLed
// for 10 s under load, and the sync app with its event log SIGKILLed
// (it has no broker): what each answered, and for the Kafka app every
// event answered 200 consumed afterwards. They gate every claim.
//
// setup.go sets the setup beside the report's, item by item: its Kafka,
// kafka-go's shared connection, its consumer without a group and its
// handler's answer when Kafka fails differ from ours.
package asyncexp

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/app"
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

// modes in the order rows are listed, with how a row's label and key
// name each; busModes are those that record through Kafka.
var (
	modes     = []string{modeSync, modeKafkaAck, modeAsync, modeDatabus}
	busModes  = []string{modeKafkaAck, modeAsync, modeDatabus}
	modeNames = map[string]string{
		modeSync:     "sync",
		modeKafkaAck: "async, answered once Kafka acked (the report's)",
		modeAsync:    "async, answered once buffered",
		modeDatabus:  "databus",
	}
	modeKeys = map[string]string{
		modeSync:     "sync",
		modeKafkaAck: "kafka-acked",
		modeAsync:    "buffered",
		modeDatabus:  "databus",
	}
	conns = []int{1, 3}
)

// key is the row of mode with n connections: "kafka-acked/c1".
func key(mode string, n int) labresult.Key {
	return labresult.Key(fmt.Sprintf("%s/c%d", modeKeys[mode], n))
}

// label names a row.
func label(mode string, n int) string {
	if n == 1 {
		return modeNames[mode] + ", 1 connection"
	}
	return fmt.Sprintf("%s, %d connections", modeNames[mode], n)
}

// refs are the report's figures (wrk's Requests/sec rounded as its
// table rounds them, its mean and max latency): its "async" waited for
// Kafka's ack.
var refs = map[labresult.Key]*labresult.Ref{
	key(modeSync, 1):     ref(56, 28.20, 90.45),
	key(modeSync, 3):     ref(28, 105.07, 204.37),
	key(modeKafkaAck, 1): ref(120, 21.24, 89.19),
	key(modeKafkaAck, 3): ref(87, 40.31, 103.10),
}

func ref(rps, meanMS, maxMS float64) *labresult.Ref {
	return &labresult.Ref{RPS: labresult.F(rps), MeanMS: labresult.F(meanMS), MaxMS: labresult.F(maxMS)}
}

// Experiment is report A2's experiment.
type Experiment struct{}

// New returns the experiment.
func New() *Experiment { return &Experiment{} }

func (*Experiment) Spec(o lab.Options) lab.Spec {
	// An app that loses events when its bus fails has not earned its
	// speed: the fault rows gate every claim.
	gates := faultKeys(o)
	s := lab.Spec{
		Name:  "async",
		Title: "sync to async: recording an event by HTTP vs through Kafka, with zero loss (report A2)",
		Claims: []labresult.Claim{{
			Text:   "producing the event to Kafka and answering once Kafka acknowledged it (the report's async handler) serves >= 2x the requests per second of posting it to the event log (sync), at 1 connection",
			Ratio:  labresult.Ratio{Num: key(modeKafkaAck, 1), Den: key(modeSync, 1), Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(2),
			Report: "120 / 56 = 2.14", ReportRatio: 120.0 / 56,
			Gates: gates,
		}, {
			Text:   "answering once the event is buffered for Kafka serves >= 2x the requests per second of sync, at 1 connection",
			Ratio:  labresult.Ratio{Num: key(modeAsync, 1), Den: key(modeSync, 1), Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(2),
			Report: "not measured: the report's handler waited for Kafka",
			Gates:  gates,
		}, {
			Text:   "answering once Kafka acknowledged the event serves >= 2x the requests per second of sync, at 3 connections",
			Ratio:  labresult.Ratio{Num: key(modeKafkaAck, 3), Den: key(modeSync, 3), Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(2),
			Report: "87 / 28 = 3.11", ReportRatio: 87.0 / 28,
			Gates: gates,
		}},
		Metrics: metrics,
		Figures: figures(o),
		Setup:   setupItems(o),
		Needs:   []string{lab.DepKafka},
	}
	for _, mode := range modes {
		for _, n := range conns {
			s.Rows = append(s.Rows, lab.RefRow(key(mode, n), label(mode, n), refs[key(mode, n)]))
		}
	}
	if brokerFault(o) {
		s.Rows = append(s.Rows, lab.Row(faultBrokerKey, faultBrokerLabel))
	}
	s.Rows = append(s.Rows, lab.Row(faultEventLogKey, faultEventLogLabel))
	return s
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
	before, outage, after := faultTiming(o)
	faults := time.Duration(len(faultKeys(o))) * (before + outage + after + time.Second) // and a restart each
	if brokerFault(o) {
		faults += 3 * time.Second // a Kafka, app and consumer of their own, and the drain
	}
	return rounds + others + drains + start + faults
}

func (*Experiment) Run(ctx context.Context, run *lab.Run) error {
	b := &bench{run: run, t: timings(run.Opts), buses: map[string]*bus{}, rows: map[labresult.Key]*labresult.Row{}}
	b.setEnv()
	if err := b.startServices(ctx); err != nil {
		return err
	}
	if err := b.startBuses(ctx); err != nil {
		return err
	}
	if err := b.claimRows(ctx); err != nil {
		return err
	}
	if err := b.otherRows(ctx); err != nil {
		return err
	}
	// Delivery: every event answered 200 consumed, per app.
	for _, mode := range busModes {
		if err := b.buses[mode].verify(ctx, run, b.t); err != nil {
			return err
		}
	}
	b.addRows()
	return b.faults(ctx)
}

// bench is what the phases share: the event log and the sync app, Kafka
// and the gateway, the apps that record through them (buses), each
// stopped by run.Cleanup when Run returns, and the rows measured so far.
type bench struct {
	run     *lab.Run
	t       timing
	el      *lab.Service // the sync app's event log
	syncApp *lab.Service
	k       *lab.Kafka
	gw      *lab.Gateway
	buses   map[string]*bus // by mode
	rows    map[labresult.Key]*labresult.Row
}

// setEnv records the setup the rows share.
func (b *bench) setEnv() {
	run := b.run
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("services", fmt.Sprintf("apps and event log (or its consumers) at %.1f CPU, %d MB each, like the report's containers", svcCPU, svcMemMB))
	run.SetEnv("load", "hlab load, closed model (wrk -tN -cN)")
	run.SetEnv("workload", "GET /handle: 1001 x json.Marshal of a random 10-letter string, then an event (UUID, random 100-char body); the log work: 1001 x json.Marshal of a random 50-char string per event")
	run.SetEnv("topic", "one partition per app, as in the report")
	run.SetEnv("method", "every app and consumer runs for the whole experiment; the claims' rows (1 connection, then sync and the report's async at 3) run in rounds, their order alternating; consumers work beside the load, and drain once the rows are measured")
}

// startServices starts the event log and the sync app posting to it,
// Kafka, and the databus gateway in front of Kafka.
func (b *bench) startServices(ctx context.Context) error {
	var err error
	if b.el, err = b.run.StartService(ctx, "eventlog", svcCPU, svcMemMB); err != nil {
		return err
	}
	b.run.Cleanup(func() { b.el.Stop() })
	syncCfg := app.Config{Mode: app.Sync, EventLog: b.el.URL("")}
	if b.syncApp, err = b.run.StartService(ctx, "app", svcCPU, svcMemMB, syncCfg.Args()...); err != nil {
		return err
	}
	b.run.Cleanup(func() { b.syncApp.Stop() })
	b.run.UsedInFirstClaim(itemSync, syncText(cmp.Or(syncCfg.Timeout, app.DefaultTimeout)))
	b.run.UsedInFirstClaim(itemQuotas, quotaText(svcCPU, svcMemMB))
	if b.k, err = b.run.StartKafka(ctx, 1); err != nil {
		return err
	}
	b.run.Cleanup(b.k.Stop)
	b.run.SetEnv("kafka", b.k.Kind)
	if len(b.run.Opts.External.KafkaBrokers) == 0 { // external brokers: their version is the server's
		b.run.UsedInFirstClaim(itemKafka, b.k.Kind)
	}
	if b.gw, err = b.run.StartGateway(ctx, 0, 0, gateway.Options{Config: gateway.Config{Brokers: b.k.Brokers}}); err != nil {
		return err
	}
	b.run.Cleanup(func() { b.gw.Stop() })
	b.run.SetEnv("databus", "hlab serve databus (report D's gateway), unconstrained like Kafka: the bus side")
	return nil
}

// startBuses starts, for each mode that records through Kafka, its app
// and its consumer on a topic of their own.
func (b *bench) startBuses(ctx context.Context) error {
	for _, mode := range busModes {
		a := app.Config{Mode: app.Mode(mode), Brokers: b.k.Brokers}
		if mode == modeDatabus {
			a = app.Config{Mode: app.Mode(mode), Databus: b.gw.GRPC}
		}
		bs, err := startBus(ctx, b.run, b.k, a)
		if bs != nil {
			b.run.Cleanup(func() { bs.stop(ctx) })
		}
		if err != nil {
			return err
		}
		if a.Mode == app.KafkaAck {
			b.run.UsedInFirstClaim(itemProducer, producerText(a.Mode))
		}
		b.buses[mode] = bs
	}
	return nil
}

var _ lab.Experiment = (*Experiment)(nil)
