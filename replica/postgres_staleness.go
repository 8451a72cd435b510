package replica

import (
	"fmt"
	"time"
)

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

// checkHeard fails once the stream has brought nothing since heard for
// longer than a live server takes to answer the replies the source asks
// for every status interval (10 of them, at least 5 s). A connection the
// network black-holed (a NAT or firewall that dropped its state, a host
// gone without a reset) fails no read or write for many minutes: the
// source ends it and reconnects instead.
func (c pgConfig) checkHeard(heard time.Time) error {
	limit := max(5*time.Second, 10*c.statusInterval)
	if silent := time.Since(heard); silent > limit {
		return fmt.Errorf("replication stream: nothing from the server for %s although it was asked to reply every %s: taking the connection for dead",
			silent.Round(time.Millisecond), c.statusInterval)
	}
	return nil
}
