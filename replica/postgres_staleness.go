package replica

import "time"

// PostgresMaxStaleness bounds how old the tables' data may be before
// their Fresh returns a *StaleError (ErrStale): d after the source last
// confirmed it had everything the server committed (an applied
// transaction, or a keepalive showing nothing pending, which the source
// asks for every PostgresStatusInterval). 0, the default, is no bound.
// d must be longer than the status interval; a few times it leaves room
// for a slow round trip. See "Bounded staleness" in the package doc.
func PostgresMaxStaleness(d time.Duration) PostgresOption {
	return func(c *pgConfig) { c.maxStaleness = d }
}
