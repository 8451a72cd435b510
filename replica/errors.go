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

// ErrSnapshotQueued is wrapped by a PostgresSource's Err, and its tables',
// while it waits for a turn to load a snapshot (PostgresSnapshotLimit):
// other replicas of its publication are loading theirs. The error says how
// long it has waited; the tables stay not Ready meanwhile.
var ErrSnapshotQueued = errors.New("replica: waiting for a turn to load a snapshot")
