package replica

import (
	"fmt"
	"iter"
	"sync/atomic"
	"time"
)

// StaleError is what Table.Fresh returns once the table's source has not
// confirmed it current for longer than its bound (PostgresMaxStaleness,
// MongoMaxStaleness). errors.Is(err, ErrStale) matches it; errors.As
// gives the age, to answer with.
type StaleError struct {
	Table string
	// Age is how long ago the source last confirmed that the table held
	// everything the database had committed (since the table was made,
	// if it never did).
	Age time.Duration
	// Max is the bound the source was given.
	Max time.Duration
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("replica: table %s was last confirmed current %s ago, longer than its bound of %s: its source is not streaming or has not caught up (see Err)",
		e.Table, e.Age.Round(time.Millisecond), e.Max)
}

// Is makes errors.Is(err, ErrStale) true for a *StaleError.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// freshness is when a table was last known to hold everything its source
// had committed. The source writes it; request handlers read it without
// a lock.
type freshness struct {
	made      time.Time
	confirmed atomic.Int64 // unix nanos; 0: never
	max       atomic.Int64 // nanoseconds; 0: no bound
}

// confirm records that at time at the table held everything its source
// had committed.
func (f *freshness) confirm(at time.Time) {
	n := at.UnixNano()
	for {
		old := f.confirmed.Load()
		if n <= old || f.confirmed.CompareAndSwap(old, n) {
			return
		}
	}
}

func (f *freshness) age(now time.Time) time.Duration {
	if n := f.confirmed.Load(); n > 0 {
		return max(0, now.Sub(time.Unix(0, n)))
	}
	return now.Sub(f.made)
}

// Age is how long ago the table's source last confirmed that the table
// held everything the database had committed: by applying a transaction
// or, while nothing changes, by a keepalive from the server showing
// nothing pending (see "Bounded staleness" in the package doc). Before
// the first load it is the time since the table was made. It reads two
// atomics and allocates nothing.
func (t *Table[K, V]) Age() time.Duration { return t.AgeAt(time.Now()) }

// AgeAt is Age at the time now: a handler that checks several tables
// reads the clock once for all of them.
func (t *Table[K, V]) AgeAt(now time.Time) time.Duration { return t.freshness.age(now) }

// Fresh is the check a request handler makes before it reads: nil while
// the table's Age is within the bound its source was given
// (PostgresMaxStaleness, MongoMaxStaleness), a *StaleError (matching
// ErrStale) once it is not, or before the first load. Without a bound it
// is always nil. Get stays as it is: Fresh once, then any number of reads.
func (t *Table[K, V]) Fresh() error { return t.FreshAt(time.Now()) }

// FreshAt is Fresh at the time now (see AgeAt).
func (t *Table[K, V]) FreshAt(now time.Time) error {
	limit := time.Duration(t.freshness.max.Load())
	if limit <= 0 {
		return nil
	}
	if age := t.AgeAt(now); age > limit || t.freshness.confirmed.Load() == 0 {
		return &StaleError{Table: t.name, Age: age, Max: limit}
	}
	return nil
}

// boundStaleness gives every table of bindings the bound d (0: none),
// after checking it against how often the source confirms freshness
// while idle (every): a bound below that would call an idle replica
// stale. option names the option, for the error.
func boundStaleness(bindings []Binding, d, every time.Duration, option, everyOption string) error {
	if d < 0 {
		return fmt.Errorf("replica: %s(%s): give a positive duration, or 0 for no bound", option, d)
	}
	if d > 0 && d <= every {
		return fmt.Errorf("replica: %s(%s) must be longer than %s (%s): an idle source confirms it is current only that often; give it at least twice that", option, d, every, everyOption)
	}
	for _, b := range bindings {
		b.freshness().max.Store(int64(d))
	}
	return nil
}

// confirmFresh records that at time at every table of bindings held
// everything the source had committed.
func confirmFresh(bindings iter.Seq[Binding], at time.Time) {
	for b := range bindings {
		b.freshness().confirm(at)
	}
}
