package replica

import (
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
)

// Observable is what RegisterMetrics reads: any Table.
type Observable interface {
	Name() string
	Stats() Stats
	observeLag(func(time.Duration))
}

func (t *Table[K, V]) observeLag(f func(time.Duration)) {
	t.OnChange(func(c Change[K, V]) {
		if c.Op != Reload && !c.Commit.IsZero() {
			f(time.Since(c.Commit))
		}
	})
}

// RegisterMetrics exports the tables' state to reg: rows, readiness,
// applied changes, their age (replica_staleness_seconds: Table.Age),
// estimated bytes (replica_table_bytes and replica_table_bytes_per_row),
// and the lag from a change's commit in the source to
// its being visible here (a histogram). Sources with decode errors can be
// added with RegisterSource.
func RegisterMetrics(reg prometheus.Registerer, tables ...Observable) error {
	lag := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "replica_lag_seconds",
		Help:    "From a change's commit in the source to its being visible in the replica.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 100 µs .. 13 s
	}, []string{"table"})
	if err := reg.Register(lag); err != nil {
		return err
	}
	for _, t := range tables {
		obs := lag.WithLabelValues(t.Name())
		t.observeLag(func(d time.Duration) { obs.Observe(d.Seconds()) })
	}
	return reg.Register(&collector{tables: tables})
}

var (
	rowsDesc    = prometheus.NewDesc("replica_rows", "Rows in the replica.", []string{"table"}, nil)
	readyDesc   = prometheus.NewDesc("replica_ready", "1 while the replica holds current data.", []string{"table"}, nil)
	appliedDesc = prometheus.NewDesc("replica_applied_changes_total", "Changes applied from the source.", []string{"table"}, nil)
	ageDesc     = prometheus.NewDesc("replica_staleness_seconds", "Time since the source last confirmed the replica held everything the database had committed (an applied transaction, or a keepalive showing nothing pending).", []string{"table"}, nil)
	bytesDesc   = prometheus.NewDesc("replica_table_bytes", "Estimated memory the table holds (Stats.Bytes: renewed at each load and merge, see the package doc's Memory).", []string{"table"}, nil)
	perRowDesc  = prometheus.NewDesc("replica_table_bytes_per_row", "Estimated memory the table holds per row.", []string{"table"}, nil)
)

type collector struct{ tables []Observable }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rowsDesc
	ch <- readyDesc
	ch <- appliedDesc
	ch <- ageDesc
	ch <- bytesDesc
	ch <- perRowDesc
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.tables {
		s := t.Stats()
		ready := 0.0
		if s.Ready {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(rowsDesc, prometheus.GaugeValue, float64(s.Rows), t.Name())
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready, t.Name())
		ch <- prometheus.MustNewConstMetric(appliedDesc, prometheus.CounterValue, float64(s.Applied), t.Name())
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, s.Age.Seconds(), t.Name())
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(s.Bytes), t.Name())
		ch <- prometheus.MustNewConstMetric(perRowDesc, prometheus.GaugeValue, s.BytesPerRow, t.Name())
	}
}

// DecodeErrorCounter is a source that counts rows it could not decode.
type DecodeErrorCounter interface{ DecodeErrors() int64 }

// RegisterSource exports a source's counters to reg, labelled with name:
//
//	replica_decode_errors_total{source}   rows not applied: they did not decode
//	replica_resyncs_total{source,reason}  full reloads after the first load,
//	                                      by reason (Resync* constants; "any"
//	                                      for a source that does not say)
//	replica_applied_lsn{source}           PostgresSource: AppliedLSN, in bytes
//	replica_persisted_lsn{source}         with PostgresPersist: the last restart file's position
//	replica_disk_start{source,refused}    with PostgresPersist: how the first load went (DiskStart)
//	replica_snapshot_wait_seconds_total{source}
//	                                      PostgresSource: time waited for a turn
//	                                      to load (PostgresSnapshotLimit)
//	replica_snapshot_loading{source}      PostgresSource: 1 while it loads
//
// With replica_ready{table} these tell when a replica has caught up after
// a fault (see the package doc).
func RegisterSource(reg prometheus.Registerer, name string, src interface {
	DecodeErrorCounter
	Resyncs() int64
}) error {
	return reg.Register(&sourceCollector{name: name, src: src})
}

var (
	decodeErrorsDesc = prometheus.NewDesc("replica_decode_errors_total", "Source rows not applied because they did not decode (each is logged with its key).", []string{"source"}, nil)
	resyncsDesc      = prometheus.NewDesc("replica_resyncs_total", "Full resyncs after the first load, by reason (a dropped or invalidated slot, lost change-stream history, an ended stream).", []string{"source", "reason"}, nil)
	appliedLSNDesc   = prometheus.NewDesc("replica_applied_lsn", "WAL position (bytes) before which every change to the source's tables is visible in them: caught up with a server position once it reaches it.", []string{"source"}, nil)
)

type sourceCollector struct {
	name string
	src  interface {
		DecodeErrorCounter
		Resyncs() int64
	}
}

// Optional parts of a source.
type (
	resyncsByReason interface{ ResyncsByReason() map[string]int64 }
	appliedLSN      interface{ AppliedLSN() pglogrepl.LSN }
)

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- decodeErrorsDesc
	ch <- resyncsDesc
	if _, ok := c.src.(appliedLSN); ok {
		ch <- appliedLSNDesc
	}
	describePersist(ch, c.src)
	describeSnapshotTurns(ch, c.src)
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(decodeErrorsDesc, prometheus.CounterValue, float64(c.src.DecodeErrors()), c.name)
	if r, ok := c.src.(resyncsByReason); ok {
		for reason, n := range r.ResyncsByReason() {
			ch <- prometheus.MustNewConstMetric(resyncsDesc, prometheus.CounterValue, float64(n), c.name, reason)
		}
	} else {
		ch <- prometheus.MustNewConstMetric(resyncsDesc, prometheus.CounterValue, float64(c.src.Resyncs()), c.name, "any")
	}
	if a, ok := c.src.(appliedLSN); ok {
		ch <- prometheus.MustNewConstMetric(appliedLSNDesc, prometheus.GaugeValue, float64(a.AppliedLSN()), c.name)
	}
	collectPersist(ch, c.name, c.src)
	collectSnapshotTurns(ch, c.name, c.src)
}
