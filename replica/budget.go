package replica

import (
	"fmt"
	"math"
	"sync/atomic"
)

// TableOption configures a Table (NewTable).
type TableOption func(*tableMemory)

// MaxBytes is a memory budget for a table, as Stats.Bytes estimates it
// (see "Memory" in the package doc). A load that would pass it, or a
// transaction that would make the table pass it, is not applied: the
// source's Run ends with an error wrapping ErrMemoryBudget that names the
// table, its rows, the bytes and the budget, rather than the process
// growing until the kernel's OOM killer ends it with no reason given.
// 0 (the default) is no budget.
func MaxBytes(n int64) TableOption { return func(m *tableMemory) { m.max = n } }

// tableMemory is a table's memory estimate and budget.
type tableMemory struct {
	max int64
	// perRow is the estimated bytes per row of the table's own
	// structures (float64 bits), held the binding's copies of values
	// stored out of line.
	perRow atomic.Uint64
	held   atomic.Int64
	// The applier's (under the table's writeMu): the rows at the last
	// estimate and the changes applied since.
	rows, changes int
}

// estimated records an estimate of perRow bytes a row over rows rows.
func (m *tableMemory) estimated(rows int, perRow float64) {
	m.perRow.Store(math.Float64bits(perRow))
	m.rows, m.changes = rows, 0
}

// dueAtMerge says whether a merge that leaves rows rows renews the
// estimate: once the rows moved by an eighth, or as many changes as rows
// went by (values may have grown in place). An estimate walks 256 rows by
// reflection (some 100 µs), which a small table's merge every 64 changes
// would pay each time; this way it costs a few hundred nanoseconds a
// change at most.
func (m *tableMemory) dueAtMerge(rows int) bool {
	return m.changes >= m.rows || 8*abs(rows-m.rows) >= m.rows
}

func abs(n int) int                      { return max(n, -n) }
func (m *tableMemory) rowBytes() float64 { return math.Float64frombits(m.perRow.Load()) }

// bytes is the estimate for a table of rows rows.
func (m *tableMemory) bytes(rows int) int64 {
	return int64(m.rowBytes()*float64(rows)) + m.held.Load()
}

// check fails if a table named name of rows rows, at perRow bytes a row
// and held bytes of held values, passes the budget.
func (m *tableMemory) check(name string, rows int, perRow float64, held int64) error {
	if m.max <= 0 {
		return nil
	}
	if b := int64(perRow*float64(rows)) + held; b > m.max {
		return fmt.Errorf("%w: table %s would hold %d rows in about %d bytes (%.0f a row), over its budget of %d (replica.MaxBytes): raise the budget and the memory the process may use, or keep less of each row (decode only the columns you read)",
			ErrMemoryBudget, name, rows, b, float64(b)/float64(max(rows, 1)), m.max)
	}
	return nil
}

// overBudget fails if a transaction would make one of the tables it
// touched pass its budget: checked for all before any is applied, so a
// transaction is applied whole or not at all.
func overBudget(touched map[Binding]bool) error {
	for b := range touched {
		if err := b.overBudget(); err != nil {
			return err
		}
	}
	return nil
}
