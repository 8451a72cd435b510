package replica

import (
	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
)

// The durable mode's metrics (PostgresPersist), exported by
// RegisterSource for a source that has it:
//
//	replica_persisted_lsn{source}              the position of the last restart file written: the
//	                                           slot keeps the WAL since; a gap to replica_applied_lsn
//	                                           that grows means the file is not being written
//	replica_disk_start{source,refused}         1 once the first load is done: refused is "" when
//	                                           it came from the file, else why not (Disk* constants)
var (
	persistedLSNDesc = prometheus.NewDesc("replica_persisted_lsn", "WAL position (bytes) of the last restart file written: the server keeps the WAL since it for the replica's slot.", []string{"source"}, nil)
	diskStartDesc    = prometheus.NewDesc("replica_disk_start", "1 once the replica's first load is done; refused is empty when it came from the restart file, else why it came from a snapshot.", []string{"source", "refused"}, nil)
)

// persistedSource is a source in durable mode.
type persistedSource interface {
	persistState() (durable bool, lsn pglogrepl.LSN)
	DiskStart() (tried bool, refused string)
}

func (s *PostgresSource) persistState() (bool, pglogrepl.LSN) {
	if s.persist == nil {
		return false, 0
	}
	return true, pglogrepl.LSN(s.persist.durable.Load())
}

func describePersist(ch chan<- *prometheus.Desc, src any) {
	if p, ok := src.(persistedSource); ok {
		if durable, _ := p.persistState(); durable {
			ch <- persistedLSNDesc
			ch <- diskStartDesc
		}
	}
}

func collectPersist(ch chan<- prometheus.Metric, name string, src any) {
	p, ok := src.(persistedSource)
	if !ok {
		return
	}
	durable, lsn := p.persistState()
	if !durable {
		return
	}
	ch <- prometheus.MustNewConstMetric(persistedLSNDesc, prometheus.GaugeValue, float64(lsn), name)
	if tried, refused := p.DiskStart(); tried {
		ch <- prometheus.MustNewConstMetric(diskStartDesc, prometheus.GaugeValue, 1, name, refused)
	}
}
