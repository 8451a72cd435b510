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
