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
//   - async: the app produces each event to Kafka (one partition) and
//     answers once it is buffered; the event log consumes it
//     (--consume) as a consumer-group member;
//   - databus: the app publishes each event through the databus gateway
//     (report D's architecture; unconstrained, like Kafka) and answers
//     once Kafka stored it; the event log consumes as in async.
//
// After each async and databus row the lab waits for the consumer to
// drain, then records events produced (stored in Kafka) against events
// consumed, duplicates, and the consumer's lag when the load stopped; an
// event answered 200 that was not consumed fails the experiment. The
// claim: async serves at least twice the RPS of sync at 1 connection.
package async

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// The report's container limits, for the app and the event log alike.
const (
	svcCPU   = 0.2
	svcMemMB = 500
)

// Modes, as rows name them and "hlab serve app --mode" takes them.
const (
	modeSync    = "sync"
	modeAsync   = "async"
	modeDatabus = "databus"
)

var conns = []int{1, 3}

// label names a row; the claim refers to two of them.
func label(mode string, n int) string {
	if n == 1 {
		return mode + ", 1 connection"
	}
	return fmt.Sprintf("%s, %d connections", mode, n)
}

// refs are the report's figures (RPS, mean ms); databus has none.
var refs = map[string]*lab.Ref{
	label(modeSync, 1):  ref(56, 28.20),
	label(modeSync, 3):  ref(28, 105.07),
	label(modeAsync, 1): ref(120, 21.24),
	label(modeAsync, 3): ref(87, 40.31),
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
		Text:      "producing the event to Kafka (async) serves >= 2x the requests per second of posting it to the event log (sync), at 1 connection",
		Metric:    "rps",
		Numerator: label(modeAsync, 1), Denominator: label(modeSync, 1),
		AtLeast: 2,
	}}
}

// timing is a mode's durations.
type timing struct {
	run   time.Duration // one measured run
	drain time.Duration // longest wait for the consumer to drain after a row
	stall time.Duration // give up draining when nothing was consumed for this long
}

func timings(o lab.Options) timing {
	if o.Mode == lab.Full {
		return timing{run: o.RunDuration(5*time.Second, 0), drain: 5 * time.Minute, stall: 30 * time.Second}
	}
	return timing{run: o.RunDuration(5*time.Second, 2*time.Second), drain: 90 * time.Second, stall: 20 * time.Second}
}

func (*Experiment) Estimate(o lab.Options) time.Duration {
	t := timings(o)
	row := o.Warmup() + time.Duration(o.Repeats())*t.run
	rows := time.Duration(3*len(conns)) * row
	// The consumer at 0.2 CPU processes about half of what the async app
	// produces: it drains about as long as the row ran, after 4 rows.
	drains := time.Duration(2*len(conns)) * row / 2
	start := 6 * time.Second // services, kfake, the gateway
	if o.Kafka == lab.KafkaReal {
		start += 10 * time.Second
	}
	return rows + drains + start
}

func (e *Experiment) Run(ctx context.Context, run *lab.Run) error {
	t := timings(run.Opts)
	run.SetEnv("quota", string(run.Sandbox.Mechanism()))
	run.SetEnv("services", fmt.Sprintf("app and event log (or its consumer) at %.1f CPU, %d MB each, like the report's containers", svcCPU, svcMemMB))
	run.SetEnv("load", "hlab load, closed model (wrk -tN -cN)")
	run.SetEnv("workload", "GET /handle: 1001 x json.Marshal of a random 10-letter string, then an event (UUID, random 100-char body); the log work: 1001 x json.Marshal of a random 50-char string per event")
	run.SetEnv("topic", "one partition, as in the report")

	if err := e.syncRows(ctx, run, t); err != nil {
		return err
	}
	k, err := run.StartKafka(ctx, 1)
	if err != nil {
		return err
	}
	defer k.Stop()
	run.SetEnv("kafka", k.Kind)
	var lost []string
	if err := e.busRows(ctx, run, t, k, modeAsync, "--brokers", strings.Join(k.Brokers, ",")); err != nil {
		if !errors.As(err, new(*lostError)) {
			return err
		}
		lost = append(lost, err.Error())
	}
	gw, err := startGateway(ctx, run, k.Brokers)
	if err != nil {
		return err
	}
	defer gw.Stop()
	run.SetEnv("databus", "hlab serve databus (report D's gateway), unconstrained like Kafka: the bus side")
	if err := e.busRows(ctx, run, t, k, modeDatabus, "--databus", gw.grpc); err != nil {
		if !errors.As(err, new(*lostError)) {
			return err
		}
		lost = append(lost, err.Error())
	}
	if len(lost) > 0 {
		return fmt.Errorf("async: events answered 200 were not consumed: %s", strings.Join(lost, "; "))
	}
	return nil
}

// syncRows measures the app posting each event to the event log.
func (e *Experiment) syncRows(ctx context.Context, run *lab.Run, t timing) error {
	el, err := run.StartService(ctx, "eventlog", svcCPU, svcMemMB)
	if err != nil {
		return err
	}
	defer el.Stop()
	app, err := run.StartService(ctx, "app", svcCPU, svcMemMB, "--mode", modeSync, "--eventlog", el.URL(""))
	if err != nil {
		return err
	}
	defer app.Stop()
	for _, n := range conns {
		row, err := run.Measure(ctx, lab.Measurement{
			Label: label(modeSync, n), URL: app.URL("/handle"), Ref: refs[label(modeSync, n)],
			Procs: []*sandbox.Process{app.Proc, el.Proc}, Duration: t.run,
			Load: []loadgen.Option{loadgen.Connections(n)},
			Counters: []lab.Counter{
				{Key: "events_recorded", URL: app.URL("/metrics"), Name: "app_events_recorded_total"},
				{Key: "events_failed", URL: app.URL("/metrics"), Name: "app_events_failed_total"},
				{Key: "events_saved", URL: el.URL("/metrics"), Name: "eventlog_http_events_total"},
			},
		})
		if err != nil {
			return err
		}
		row.Note = "cpu and rss: app + event log"
		run.AddRow(row)
	}
	return nil
}

// lostError is a row whose accepted events were not all consumed.
type lostError struct {
	label string
	lost  int64
}

func (e *lostError) Error() string {
	return fmt.Sprintf("%s: %d events answered 200 were not consumed", e.label, e.lost)
}

// busRows measures the app recording through Kafka (async) or the
// gateway (databus), with the event log consuming, and checks delivery.
func (e *Experiment) busRows(ctx context.Context, run *lab.Run, t timing, k *lab.Kafka, mode string, appArgs ...string) error {
	topic := fmt.Sprintf("lab-async-%s-%d", mode, time.Now().UnixNano())
	if err := k.CreateTopic(ctx, topic, 1); err != nil {
		return err
	}
	defer k.DeleteTopic(context.WithoutCancel(ctx), topic)
	group := topic
	cons, err := run.StartService(ctx, "eventlog", svcCPU, svcMemMB, "--consume", "--brokers", strings.Join(k.Brokers, ","), "--topic", topic, "--group", group)
	if err != nil {
		return err
	}
	defer cons.Stop()
	app, err := run.StartService(ctx, "app", svcCPU, svcMemMB, append([]string{"--mode", mode, "--topic", topic}, appArgs...)...)
	if err != nil {
		return err
	}
	defer app.Stop()

	var lost *lostError
	for _, n := range conns {
		lbl := label(mode, n)
		before, err := readCounts(ctx, app, cons)
		if err != nil {
			return err
		}
		row, err := run.Measure(ctx, lab.Measurement{
			Label: lbl, URL: app.URL("/handle"), Ref: refs[lbl],
			Procs: []*sandbox.Process{app.Proc, cons.Proc}, Duration: t.run,
			Load: []loadgen.Option{loadgen.Connections(n)},
		})
		if err != nil {
			return err
		}
		// The lag when the load stops, as Kafka sees it (stored minus
		// committed), and as the consumer reports it.
		lagEnd, lagErr := k.GroupLag(ctx, group)
		consLag, _ := scrapeOne(ctx, cons, "eventlog_consumer_lag_records")
		run.Progress.Step(lbl+": waiting for the consumer to drain", time.Duration(lagEnd)*10*time.Millisecond)
		start := time.Now()
		after, drainErr := drain(ctx, app, cons, k, group, t)
		drained := time.Since(start)
		if drainErr != nil && ctx.Err() != nil {
			return drainErr
		}
		f := after.sub(before)
		row.Figures = map[string]float64{
			"events_recorded":       f.recorded,  // answered 200 with the event accepted
			"events_failed":         f.failed,    // answered 503
			"events_produced":       f.delivered, // stored in Kafka
			"events_consumed":       f.consumed,  // processed by the consumer, duplicates excluded
			"events_duplicates":     f.duplicates,
			"events_lost":           max(0, f.recorded-f.consumed),
			"events_lost_by_app":    f.lost, // accepted, then refused by Kafka for good
			"consumer_lag_at_end":   float64(lagEnd),
			"consumer_lag_reported": consLag,
			"drain_seconds":         drained.Seconds(),
		}
		if lagErr != nil {
			delete(row.Figures, "consumer_lag_at_end")
			run.Note("%s: could not read the group's lag from Kafka: %v", lbl, lagErr)
		}
		row.Note = fmt.Sprintf("events: %.0f produced, %.0f consumed, %.0f lost, %.0f duplicates; consumer lag when the load stopped %d, drained in %.1f s; cpu and rss: app + consumer",
			f.delivered, f.consumed, row.Figures["events_lost"], f.duplicates, lagEnd, drained.Seconds())
		if drainErr != nil {
			row.Note += "; " + drainErr.Error()
		}
		run.AddRow(row)
		if l := int64(row.Figures["events_lost"]); l > 0 && lost == nil {
			lost = &lostError{label: lbl, lost: l}
		}
	}
	if lost != nil {
		return lost
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

func scrapeOne(ctx context.Context, s *lab.Service, name string) (float64, error) {
	m, err := lab.Scrape(ctx, s.URL("/metrics"))
	if err != nil {
		return 0, err
	}
	return m[name], nil
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

// gateway is a running "hlab serve databus".
type gateway struct {
	*lab.Service
	grpc string
}

func startGateway(ctx context.Context, run *lab.Run, brokers []string) (*gateway, error) {
	var lastErr error
	for range 3 { // a free port can be taken before the gateway binds it
		port, err := deps.FreePort()
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		svc, err := run.StartService(ctx, "databus", 0, 0, "--brokers", strings.Join(brokers, ","), "--grpc-addr", addr)
		if err == nil {
			return &gateway{Service: svc, grpc: addr}, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

var _ lab.Experiment = (*Experiment)(nil)
