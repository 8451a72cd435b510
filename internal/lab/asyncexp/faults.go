package asyncexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/app"
	"github.com/highload-lab/hlab/loadgen"
)

// The report's con, "one more point of failure: the bus", as rows: each
// app under a steady load while what records its events is SIGKILLed and
// started again 10 s later. The Kafka-acked app (the report's handler)
// loses its broker: kfake from its log on disk, or the real broker
// stopped and started. The sync app has no broker: its one point of
// failure is the event log, which it calls inside each request. Each row
// gives what the app answered across the outage (success ratio, p99,
// statuses); the Kafka row also every event answered 200 consumed once
// the broker is back (Row.Lost), which gates the claims.
const (
	faultOutage = 10 * time.Second
	// faultRate is the rows' load, in the open model so that requests keep
	// arriving while the app waits: well below either app's capacity at
	// 0.2 CPU, so that the row shows the outage, not an overload.
	faultRate     = 20
	faultInflight = 100 // the open model's cap on requests in flight
	// faultMinSuccess: a fault row fails requests by design while the
	// dependency is down; it is evidence unless (nearly) nothing was
	// answered, the app not coming back at all.
	faultMinSuccess = 0.01
)

// The fault rows.
const (
	faultBrokerKey   labresult.Key = "fault/broker-down/kafka-acked"
	faultEventLogKey labresult.Key = "fault/eventlog-down/sync"
)

var (
	faultBrokerLabel   = fmt.Sprintf("fault: Kafka broker down for %.0f s under %d req/s, async answered once Kafka acked", faultOutage.Seconds(), faultRate)
	faultEventLogLabel = fmt.Sprintf("fault: event log down for %.0f s under %d req/s, sync (it has no broker)", faultOutage.Seconds(), faultRate)
)

// brokerFault reports whether the broker row runs with o: it takes down
// a Kafka the lab starts, which external brokers are not.
func brokerFault(o lab.Options) bool { return len(o.External.KafkaBrokers) == 0 }

// faultKeys are the fault rows a run with o measures; they gate every
// claim.
func faultKeys(o lab.Options) []labresult.Key {
	if brokerFault(o) {
		return []labresult.Key{faultBrokerKey, faultEventLogKey}
	}
	return []labresult.Key{faultEventLogKey}
}

// faultTiming is the load before and after an outage, and its length:
// shortened in short runs, which test the wiring.
func faultTiming(o lab.Options) (before, outage, after time.Duration) {
	if o.Short {
		return 300 * time.Millisecond, time.Second, time.Second
	}
	return 500 * time.Millisecond, faultOutage, 2 * time.Second
}

// faults measures the fault rows, after every other row.
func (b *bench) faults(ctx context.Context) error {
	if brokerFault(b.run.Opts) {
		if err := b.brokerDown(ctx); err != nil {
			return fmt.Errorf("%s: %w", faultBrokerLabel, err)
		}
	}
	if err := b.eventLogDown(ctx); err != nil {
		return fmt.Errorf("%s: %w", faultEventLogLabel, err)
	}
	return nil
}

// outage is the measurement of a fault row: the load on url while down
// runs, sampling procs (never the process killed: it is a new one after).
func (b *bench) outage(key labresult.Key, url string, procs []*sandbox.Process, down func(context.Context) error) lab.Measurement {
	before, length, after := faultTiming(b.run.Opts)
	return lab.Measurement{
		Key: key, Procs: procs, Duration: before + length + after, Repeat: 1, NoWarmup: true, MinSuccess: faultMinSuccess,
		Driver: lab.Outage{
			HTTP:   lab.HTTP{URL: url, Load: []loadgen.Option{loadgen.Rate(faultRate), loadgen.Connections(faultInflight)}},
			Before: before, After: after, Down: down,
		},
	}
}

// brokerDown measures a Kafka-acked app of its own, with its consumer,
// on a Kafka that can be taken down and come back: the experiment's when
// it can (the real broker; the other apps are idle by now), else a kfake
// of its own that keeps its log on disk; then waits for the consumer to
// drain and counts what was lost.
func (b *bench) brokerDown(ctx context.Context) error {
	k := b.k
	if !k.CanGoDown() {
		var err error
		if k, err = b.run.StartRestartableKafka(ctx, 1); err != nil {
			return err
		}
		b.run.Cleanup(k.Stop)
	}
	bs, err := startBus(ctx, b.run, k, app.Config{Mode: app.KafkaAck, Brokers: k.Brokers})
	if bs != nil {
		b.run.Cleanup(func() { bs.stop(ctx) })
	}
	if err != nil {
		return err
	}
	_, length, _ := faultTiming(b.run.Opts)
	m := b.outage(faultBrokerKey, bs.app.URL("/handle"), []*sandbox.Process{bs.app.Proc, bs.cons.Proc},
		func(ctx context.Context) error { return k.Outage(ctx, length) })
	row, err := b.run.Measure(ctx, m)
	if err != nil {
		return err
	}
	bs.rows = append(bs.rows, row)
	if err := bs.verify(ctx, b.run, b.t); err != nil {
		return err
	}
	row.AddNote("%s: %s, down %v, then started again; %s", k.Kind, brokerKill(k), length, answers(row))
	if extra := row.Value(eventsConsumed) - row.Value(eventsRecorded); extra > 0 {
		// franz-go cannot fail a record while its produce request is
		// unanswered: a request answered 503 may see its event stored.
		row.AddNote("%.0f events of requests answered 503 were stored all the same once the broker was back: a client that retries on a 503 records its event twice", extra)
	}
	b.run.AddRow(row)
	return nil
}

// brokerKill says how a broker of k's kind was taken down.
func brokerKill(k *lab.Kafka) string {
	if k.JVM {
		return "its JVM SIGKILLed, as a crash would, and started again, recovering its log"
	}
	return "its process SIGKILLed, as a crash would, and started again from its log"
}

// eventLogDown measures the sync app while its event log is SIGKILLed
// and started again. Nothing waits to be lost: an event answered 200 was
// processed by the event log before the answer.
func (b *bench) eventLogDown(ctx context.Context) error {
	_, length, _ := faultTiming(b.run.Opts)
	m := b.outage(faultEventLogKey, b.syncApp.URL("/handle"), []*sandbox.Process{b.syncApp.Proc},
		func(ctx context.Context) error {
			if err := b.el.Kill(); err != nil {
				return err
			}
			select {
			case <-time.After(length):
			case <-ctx.Done():
			}
			// Back even when ctx was cancelled meanwhile: Cleanup stops it.
			// The process lives as long as the context it starts with: not
			// one that ends here (Restart bounds its wait).
			return b.el.Restart(context.WithoutCancel(ctx))
		})
	m.Counters = []lab.Counter{
		{Metric: eventsRecorded, URL: b.syncApp.URL("/metrics"), Name: "app_events_recorded_total"},
		{Metric: eventsFailed, URL: b.syncApp.URL("/metrics"), Name: "app_events_failed_total"},
	}
	row, err := b.run.Measure(ctx, m)
	if err != nil {
		return err
	}
	row.AddNote("the event log SIGKILLed, down %v, then started again; cpu and rss: the app alone; %s", length, answers(row))
	b.run.AddRow(row)
	return nil
}

// answers says what a fault row's app answered, by status.
func answers(r *labresult.Row) string {
	s := fmt.Sprintf("answered %d requests: statuses %v", r.Requests, r.StatusCodes)
	if len(r.Errors) > 0 {
		s += fmt.Sprintf(", failures without an answer %v", r.Errors)
	}
	return s
}
