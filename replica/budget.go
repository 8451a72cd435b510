package replica

import "fmt"

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
