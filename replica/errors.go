package replica

import "errors"

// ErrSlotInUse is why a PostgresSource does not stream (its Err and its
// tables' Err wrap it) when its replication slot belongs to someone else:
// another connection streams from it, or another replica recreated it
// while this one was reconnecting. Two replicas on one slot would take it
// from each other, and the one that resumed would skip the transactions
// in between while it reported Ready; instead the source stays not Ready
// and tries again with backoff (it recovers once the other replica has
// stopped and dropped the slot).
var ErrSlotInUse = errors.New("replica: the replication slot is used by another replica; give each running replica its own slot name (replica.Slot, the services' --slot)")

// ErrUnsupportedTable is wrapped by the error that ends
// PostgresSource.Run before its first load when a bound table cannot be
// followed as it is: it is a view, a foreign, unlogged or temporary table,
// its updates and deletes do not say which row they change (no primary
// key under REPLICA IDENTITY DEFAULT, or NOTHING), its key function needs
// more than a delete carries, or it is not in the publication and this
// user may not add it. The error names the table and what to change.
// After the first load the same causes make the tables not Ready, with
// the error in Err, and the source retries.
var ErrUnsupportedTable = errors.New("replica: a bound table cannot be followed as it is")

// ErrStale is matched (errors.Is) by the *StaleError that Table.Fresh
// returns once a table's source has not confirmed it current for longer
// than its bound (PostgresMaxStaleness, MongoMaxStaleness): the stream is
// down, or behind. The table still serves its last data through Get; a
// handler that must not answer with data that old answers 503 instead.
var ErrStale = errors.New("replica: the table is older than its staleness bound")

// ErrMemoryBudget is wrapped by the error that ends a source's Run when
// a table would pass its memory budget (MaxBytes) with a load or a
// transaction, which is then not applied. The error names the table, its
// rows, the estimated bytes and the budget. The tables are left as they
// were and not Ready.
var ErrMemoryBudget = errors.New("replica: a table would pass its memory budget")

// ErrSourceStopped is returned by PostgresSource.WaitFor, for a position
// the tables have not reached, once the source's Run has returned without
// an error of its own: nothing will advance the tables any more.
var ErrSourceStopped = errors.New("replica: the source is not running (its Run returned)")

// ErrSnapshotQueued is wrapped by a PostgresSource's Err, and its tables',
// while it waits for a turn to load a snapshot (PostgresSnapshotLimit):
// other replicas of its publication are loading theirs. The error says how
// long it has waited; the tables stay not Ready meanwhile.
var ErrSnapshotQueued = errors.New("replica: waiting for a turn to load a snapshot")
