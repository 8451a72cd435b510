package asyncexp

import (
	"context"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// measurement is the row of mode with n connections: the load on that
// mode's app, sampling the app and what records its events (the event log
// or the consumer).
func (b *bench) measurement(mode string, n int) lab.Measurement {
	load := []loadgen.Option{loadgen.Connections(n)}
	m := lab.Measurement{Key: key(mode, n), Duration: b.t.run}
	if mode == modeSync {
		m.Driver = lab.HTTP{URL: b.syncApp.URL("/handle"), Load: load}
		m.Procs = []*sandbox.Process{b.syncApp.Proc, b.el.Proc}
		m.Counters = []lab.Counter{
			{Metric: eventsRecorded, URL: b.syncApp.URL("/metrics"), Name: "app_events_recorded_total"},
			{Metric: eventsFailed, URL: b.syncApp.URL("/metrics"), Name: "app_events_failed_total"},
			{Metric: eventsSaved, URL: b.el.URL("/metrics"), Name: "eventlog_http_events_total"},
		}
		return m
	}
	bs := b.buses[mode]
	m.Driver = lab.HTTP{URL: bs.app.URL("/handle"), Load: load}
	m.Procs = []*sandbox.Process{bs.app.Proc, bs.cons.Proc}
	// A JVM broker warms up until its throughput stops climbing.
	m.Steady = b.k.JVM
	return m
}

// keep records measured rows of mode: a bus's rows are its app's, whose
// delivery verify checks once every row is measured.
func (b *bench) keep(mode string, rows ...*labresult.Row) {
	for _, r := range rows {
		if mode == modeSync {
			r.AddNote("cpu and rss: app + event log")
		} else {
			b.buses[mode].rows = append(b.buses[mode].rows, r)
		}
		b.rows[r.Key] = r
	}
}

// claimRows measures the claims' rows in rounds: sync, Kafka acked and
// buffered at 1 connection, then sync and Kafka acked at 3.
func (b *bench) claimRows(ctx context.Context) error {
	sets := []struct {
		conns int
		modes []string
	}{
		{1, []string{modeSync, modeKafkaAck, modeAsync}},
		{3, []string{modeSync, modeKafkaAck}},
	}
	var ns []int
	for _, set := range sets {
		ns = append(ns, set.conns)
	}
	b.run.UsedInFirstClaim(itemLoad, loadText(ns, b.t.run))
	for _, set := range sets {
		var ms []lab.Measurement
		for _, mode := range set.modes {
			ms = append(ms, b.measurement(mode, set.conns))
		}
		rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms})
		if err != nil {
			return err
		}
		for i, mode := range set.modes {
			b.keep(mode, rows[i])
		}
	}
	return nil
}

// otherRows measures, one after another, the rows no claim pairs.
func (b *bench) otherRows(ctx context.Context) error {
	for _, mode := range modes {
		for _, n := range conns {
			if b.rows[key(mode, n)] != nil {
				continue // measured in rounds
			}
			row, err := b.run.Measure(ctx, b.measurement(mode, n))
			if err != nil {
				return err
			}
			b.keep(mode, row)
		}
	}
	return nil
}

// addRows adds the rows in the order the Spec declares them, once
// delivery was verified.
func (b *bench) addRows() {
	for _, mode := range modes {
		for _, n := range conns {
			b.run.AddRow(b.rows[key(mode, n)])
		}
	}
}
