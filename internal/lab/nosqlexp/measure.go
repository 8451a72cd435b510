package nosqlexp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/loadgen"
)

// measurement is r's load on its service, sampling the service and its
// database (unless the database is external), with the batch counters of
// a --batch service.
func (b *bench) measurement(r rowPlan) (lab.Measurement, error) {
	s := b.services[r.svc]
	procs := []*sandbox.Process{s.svc.Proc}
	if !s.external {
		dbProc := s.db()
		if dbProc == nil {
			return lab.Measurement{}, fmt.Errorf("nosql: %s: its database is not running", r.label)
		}
		procs = append(procs, dbProc)
	}
	m := lab.Measurement{
		Key: r.key, Procs: procs, Duration: runDur,
		Driver: lab.HTTP{URL: s.svc.URL("/handle"), Load: []loadgen.Option{loadgen.Connections(r.conns)}},
	}
	if r.svc == svcPGBatch || r.svc == svcCasB {
		metrics := s.svc.URL("/metrics")
		m.Counters = []lab.Counter{
			{Metric: batchRows, URL: metrics, Name: "activities_batch_rows_sum"},
			{Metric: batches, URL: metrics, Name: "activities_batch_rows_count"},
		}
	}
	return m, nil
}

// warmCassandra warms each Cassandra node through its claim row until its
// throughput stops climbing, both at once.
func (b *bench) warmCassandra(ctx context.Context) error {
	var steady []lab.Measurement
	for _, r := range claimRows {
		if strings.HasPrefix(r.svc, "cassandra") {
			m, err := b.measurement(r)
			if err != nil {
				return err
			}
			m.Steady = true
			steady = append(steady, m)
		}
	}
	return b.run.WarmUp(ctx, steady...)
}

// measureSet warms set's rows up, truncates their tables, measures them
// (in rounds when paired, else one after another), then counts what each
// table holds against the writes acknowledged, and adds the rows.
func (b *bench) measureSet(ctx context.Context, set []rowPlan, paired bool) error {
	ms := make([]lab.Measurement, len(set))
	for i, r := range set {
		var err error
		if ms[i], err = b.measurement(r); err != nil {
			return err
		}
	}
	// Warm up, then truncate: a row's table then holds exactly what its
	// measured runs wrote.
	if err := b.run.WarmUp(ctx, ms...); err != nil {
		return err
	}
	for _, r := range set {
		tab := b.services[r.svc].tab
		if err := tab.truncate(ctx); err != nil {
			return fmt.Errorf("nosql: %s: truncate %s: %w", r.label, tab.name, err)
		}
	}
	measured, err := b.measure(ctx, ms, paired)
	if err != nil {
		return err
	}
	for i, row := range measured {
		if err := b.countRow(ctx, b.services[set[i].svc].tab, row); err != nil {
			return err
		}
		b.run.AddRow(row)
	}
	return nil
}

// measure measures ms in rounds when paired, else one after another.
func (b *bench) measure(ctx context.Context, ms []lab.Measurement, paired bool) ([]*labresult.Row, error) {
	if paired {
		return b.run.MeasurePaired(ctx, lab.Paired{Measurements: ms})
	}
	var rows []*labresult.Row
	for _, m := range ms {
		row, err := b.run.Measure(ctx, m)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// countRow counts the rows in tab and records them beside the writes the
// load generator saw acknowledged in row's runs (Row.Stored, Row.Acked):
// a difference fails the row's integrity gate. A --batch row gets its
// mean batch size.
func (b *bench) countRow(ctx context.Context, tab table, row *labresult.Row) error {
	var acked int64
	for code, n := range row.StatusCodes {
		if c, err := strconv.Atoi(code); err == nil && c >= 200 && c < 300 {
			acked += n
		}
	}
	b.run.Progress.Step(row.Label+": count rows", time.Second)
	stored, err := tab.count(ctx)
	if err != nil {
		return fmt.Errorf("nosql: %s: count the rows in %s: %w", row.Label, tab.name, err)
	}
	row.Acked, row.Stored = &acked, &stored
	row.AddNote("acked %d, stored %d", acked, stored)
	if n := row.Value(batches); n > 0 {
		row.Set(meanBatchRows, row.Value(batchRows)/n)
		row.AddNote("%.1f rows per batch on average", row.Value(meanBatchRows))
	}
	return nil
}
