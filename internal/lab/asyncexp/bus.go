package asyncexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/app"
	"github.com/highload-lab/hlab/internal/services/eventlog"
)

// bus is an app that records through Kafka, its topic and its consumer.
type bus struct {
	mode      string
	app, cons *lab.Service
	topic     string
	before    counts
	rows      []*labresult.Row
	k         *lab.Kafka
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
	for _, r := range b.rows {
		r.Set(eventsRecorded, f.recorded)
		r.Set(eventsFailed, f.failed)
		r.Set(eventsProduced, f.delivered)
		r.Set(eventsConsumed, f.consumed)
		r.Set(eventsDuplicates, f.duplicates)
		r.Set(eventsLostByApp, f.lost)
		r.Set(consumerLag, float64(lagEnd))
		r.Set(drainSeconds, drained.Seconds())
		r.Lost = &lost
		r.AddNote("this app's rows: %.0f events answered 200, %.0f stored in Kafka, %.0f consumed, %d lost, %.0f duplicates; consumer lag when the load stopped %d, drained in %.1f s; cpu and rss: app + consumer",
			f.recorded, f.delivered, f.consumed, lost, f.duplicates, lagEnd, drained.Seconds())
		if lagErr != nil {
			r.AddNote("the group's lag could not be read from Kafka: %v", lagErr)
		}
		if drainErr != nil {
			r.AddNote("%v", drainErr)
		}
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
