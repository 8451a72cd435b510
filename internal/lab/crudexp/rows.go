package crudexp

import (
	"context"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/loadgen"
)

// openRow measures every optimization on at a fixed openRate (open
// model, latency from the intended send times) under the richer
// iteration, once: the targets read it.
func (b *bench) openRow(ctx context.Context) error {
	m := b.measurement(open3000Key, allOnKey, b.rich, b.openDur, loadgen.Rate(openRate), loadgen.Connections(openVUs))
	m.Repeat = 1
	_, err := b.measure(ctx, allOnKey, m)
	return err
}

// reportRows measures the claim's rows (all on, all off) in rounds, then
// each optimization off in turn, under the report's iteration.
func (b *bench) reportRows(ctx context.Context) error {
	claim := []lab.Measurement{
		b.measurement(allOnKey, allOnKey, b.svcs[allOnKey].sc, b.runDur, loadgen.Connections(vus)),
		b.measurement(allOffKey, allOffKey, b.svcs[allOffKey].sc, b.runDur, loadgen.Connections(vus)),
	}
	claim[1].MinSuccess = slowBound
	b.run.UsedInFirstClaim(itemScenario, scenarioText(vus, b.sc.Users))
	measured, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: claim,
		Around: func(i int, measure func() error) error { return b.around(claim[i].Key, claim[i].Key, measure) }})
	if err != nil {
		return err
	}
	for _, row := range measured {
		b.rows[row.Key] = row
	}
	for _, v := range variants {
		if _, err := b.measure(ctx, v.key, b.measurement(v.key, v.key, b.svcs[v.key].sc, b.runDur, loadgen.Connections(vus))); err != nil {
			return err
		}
	}
	return nil
}

// richRows measures the richer iteration, lists included, with every
// optimization on and without the indexes: the report's iteration reads
// no list, so only here do the lists' indexes reach the requests.
func (b *bench) richRows(ctx context.Context) error {
	richOff := b.rich.Clone()
	richOff.Lists = true
	if _, err := b.measure(ctx, allOnKey, b.measurement(richOnKey, allOnKey, b.rich, b.runDur, loadgen.Connections(vus))); err != nil {
		return err
	}
	m := b.measurement(richIndexOffKey, indexOffKey, richOff, b.runDur, loadgen.Connections(vus))
	m.MinSuccess = slowBound
	_, err := b.measure(ctx, indexOffKey, m)
	return err
}

// wideRows puts wideConns connections on the service with its open-file
// limit raised (all on) and kept at 1,024 (optimization 6 off). Past the
// limit the service cannot accept: a connection waits in the listen
// backlog, its request times out (wideTimeout), and dials to the
// database or the webhook fail alike. Each run is cut at its duration, so
// that requests stuck on such connections do not stretch it.
func (b *bench) wideRows(ctx context.Context) error {
	for _, r := range []struct{ key, cfg labresult.Key }{{fdOnKey, allOnKey}, {fdOffKey, fdOffKey}} {
		in := b.svcs[r.cfg]
		m := b.measurement(r.key, r.cfg, in.sc, b.runDur, loadgen.Connections(wideConns), loadgen.Timeout(wideTimeout))
		// The window closes where the cut ends the run, which is where it
		// would close anyway; said so, a short run (Options.Short, the
		// lab's tests) lasts the whole duration too: 1,200 connections
		// take longer than a short run to open and reach the limit.
		http := m.Driver.(lab.HTTP)
		http.Cut = true
		m.Driver, m.SampleTo = http, b.runDur
		if r.cfg == fdOffKey {
			m.MinSuccess = slowBound
		}
		row, err := b.measure(ctx, r.cfg, m)
		if err != nil {
			return err
		}
		// The limit in force, as the service's process collector reads it.
		if mt, err := lab.ScrapeMetrics(ctx, in.svc.URL("/metrics")); err == nil && mt.Has("process_max_fds") {
			row.Set(maxFDs, mt.Sum("process_max_fds", nil))
		}
	}
	return nil
}
