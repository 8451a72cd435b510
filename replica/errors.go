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
