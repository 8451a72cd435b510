package gateway

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultMemberGrace is Config.MemberGrace's default: longer than a
// client's reconnect backoff (the Go client reopens a stream that broke
// or whose handler failed after 25-50 ms, and waits at most 5 s however
// often it retries: its default backoff, jittered), short enough that
// the partitions of a consumer really gone go to the group's other
// members within seconds, as they would have with a gateway that died
// (Config.SessionTimeout, 10 s). Never above Config.SessionTimeout.
const DefaultMemberGrace = 5 * time.Second

// The isolation levels of Config.IsolationLevel (--isolation-level).
const (
	// IsolationReadCommitted delivers only records of committed
	// transactions (and records written outside transactions): the
	// default. A fetch reads up to the last stable offset, so records
	// written after a transaction still open wait for it to end.
	IsolationReadCommitted = "read_committed"
	// IsolationReadUncommitted delivers every record as soon as it is
	// stored, records of transactions later aborted included.
	IsolationReadUncommitted = "read_uncommitted"
)

// validateMember checks the group member's settings: a known isolation
// level, and a grace no longer than the session timeout (a consumer that
// left in good order must not hold its partitions longer than a gateway
// that died).
func (c *Config) validateMember() error {
	c.IsolationLevel = strings.ToLower(c.IsolationLevel)
	if c.IsolationLevel != IsolationReadCommitted && c.IsolationLevel != IsolationReadUncommitted {
		return fmt.Errorf("%w: --isolation-level is %q: give %s or %s", ErrBadLimit, c.IsolationLevel, IsolationReadCommitted, IsolationReadUncommitted)
	}
	if c.MemberGrace > c.SessionTimeout {
		return fmt.Errorf("%w: --member-grace is %v, above --session-timeout %v: a consumer that left would hold its partitions longer than a gateway that died; give at most %v (0: leave at once)", ErrBadLimit, c.MemberGrace, c.SessionTimeout, c.SessionTimeout)
	}
	return nil
}

// isolationLevel is franz-go's level for c.IsolationLevel: read
// committed unless it says read_uncommitted.
func (c *Config) isolationLevel() kgo.IsolationLevel {
	if strings.EqualFold(c.IsolationLevel, IsolationReadUncommitted) {
		return kgo.ReadUncommitted()
	}
	return kgo.ReadCommitted()
}
