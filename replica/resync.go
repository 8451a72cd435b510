package replica

import "sync/atomic"

// Why a source reloaded a table after its first load: the keys of
// ResyncsByReason and the reason label of replica_resyncs_total.
const (
	// ResyncSlotDropped: the Postgres replication slot is gone (dropped
	// by hand, or by another replica that had taken it over).
	ResyncSlotDropped = "slot_dropped"
	// ResyncSlotInvalidated: Postgres invalidated the slot (it fell more
	// than max_slot_wal_keep_size behind, wal_status 'lost'): it still
	// exists but can never stream again, so it is dropped and made anew.
	ResyncSlotInvalidated = "slot_invalidated"
	// ResyncPublicationChanged: the Postgres publication lacked a bound
	// table (altered by someone, or the table was dropped and made anew)
	// or an operation while the replica followed it, so the stream did not
	// carry all its changes. The source completed it (see
	// ErrUnsupportedTable when it may not).
	ResyncPublicationChanged = "publication_changed"
	// ResyncSchemaChanged: a bound table's columns, their types or its
	// replica identity changed, or it gained a partition: its rows may have
	// changed without a change in the stream (a column added with a
	// default, a table attached with its rows).
	ResyncSchemaChanged = "schema_changed"
	// ResyncPartitionTruncated: some of a bound partitioned table's
	// partitions were truncated, and the replica cannot tell which of its
	// rows were theirs.
	ResyncPartitionTruncated = "partition_truncated"
	// ResyncUnchangedMissing: an update left a value stored out of line
	// (TOAST) unchanged, which the stream does not carry, for a row the
	// replica does not hold; it should never happen, and would mean the
	// replica's row was not the table's.
	ResyncUnchangedMissing = "unchanged_value_missing"
	// ResyncHistoryLost: a MongoDB change stream cannot resume from its
	// token (the oplog rolled past it, the server was restored).
	ResyncHistoryLost = "history_lost"
	// ResyncStreamEnded: a MongoDB change stream ended for good (its
	// collection was dropped or renamed: invalidate).
	ResyncStreamEnded = "stream_ended"
)

// resyncCounter counts resyncs by reason; the set of reasons is fixed at
// creation, so every one is exported from the start (at zero).
type resyncCounter struct {
	reasons []string
	n       []atomic.Int64
}

func newResyncCounter(reasons ...string) *resyncCounter {
	return &resyncCounter{reasons: reasons, n: make([]atomic.Int64, len(reasons))}
}

func (c *resyncCounter) add(reason string) {
	for i, r := range c.reasons {
		if r == reason {
			c.n[i].Add(1)
			return
		}
	}
	panic("replica: unknown resync reason " + reason)
}

func (c *resyncCounter) total() int64 {
	var sum int64
	for i := range c.n {
		sum += c.n[i].Load()
	}
	return sum
}

func (c *resyncCounter) byReason() map[string]int64 {
	m := make(map[string]int64, len(c.reasons))
	for i, r := range c.reasons {
		m[r] = c.n[i].Load()
	}
	return m
}
