package replica

import (
	"encoding/gob"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Row is one source row: column (or field) name to value, decoded to Go
// types (pgx's for Postgres: int32, int64, string, bool, float64,
// time.Time, []byte, pgtype.Numeric, ...; BSON's for MongoDB). A delete
// carries only the key columns.
type Row map[string]any

// Binding ties a source table to a Table. Make one with Bind.
type Binding interface {
	tableName() string
	beginLoad(rowShape)
	loadRow(Row) error
	finishLoad(commit time.Time)
	upsert(Row) error
	update(old, new Row, unchanged []string) error
	remove(key Row) error
	truncate()
	flush(commit time.Time)
	overBudget() error
	reset()
	setReady(error)
	freshness() *freshness
	// The restart file (binding_persist.go).
	image() tableImage
	thawHeld()
	restore(dec *gob.Decoder, limit int, held func([][]byte) ([]any, error), commit time.Time) error
	setShape(rowShape)
	valueTypes() (string, error)
}

// rowShape is what a source tells a binding, when it loads a table, about
// the rows its changes will carry.
type rowShape struct {
	// held are the columns whose values the binding keeps for every row:
	// an update that leaves one of them unchanged may not carry it
	// (PostgreSQL sends a value stored out of line, TOAST, only when it
	// changed), so it comes from the row as the replica holds it.
	held []string
	// identity are the only columns a delete or a key change carries
	// (nil: all of them): the key function must work from them alone.
	identity []string
}

// errUnchangedMissing: an update left a value unchanged that the change
// does not carry, for a row the replica does not hold. The row in the
// replica is then not the source's, and only a reload makes it so.
var errUnchangedMissing = errors.New("an update left values unchanged that only the replica's copy of the row has, and the replica does not hold the row")

// errKeyNotFromIdentity: the key function needs columns that deletes and
// key changes do not carry.
var errKeyNotFromIdentity = errors.New("the key function needs more than the columns a delete carries")

// keyChecks is how many rows of each load check that the key function
// gives the same key from the identity columns alone as from the whole
// row: a key function that needs more would fail on every delete.
const keyChecks = 64

// Bind binds the source table t.Name() ("schema.table" or "table" for
// public; a collection name for MongoDB) to t. key extracts the primary
// key from a row (deletes carry only the key columns); decode builds the
// value. A row that fails either, or makes either panic, is counted and
// logged with its key, never applied, and never stops the applier.
func Bind[K comparable, V any](t *Table[K, V], key func(Row) (K, error), decode func(Row) (V, error)) Binding {
	return &binding[K, V]{t: t, key: key, decode: decode}
}

type binding[K comparable, V any] struct {
	t       *Table[K, V]
	key     func(Row) (K, error)
	decode  func(Row) (V, error)
	loading map[K]V
	pending []Change[K, V]
	cleared bool // a TRUNCATE in the pending transaction

	shape   rowShape
	checked int // rows of this load whose key was checked against the identity
	// held are the values of shape.held for each row (nil entries are not
	// kept: a row whose held columns are all NULL); heldTx is what the
	// pending transaction changed (nil: the row is gone), made part of
	// held when it commits, forgotten when it does not.
	held, heldTx, heldLoading map[K][]any
	// heldPerRow estimates the bytes held values take per held row; the
	// load's estimates per row are loadPerRow and loadHeld (MaxBytes).
	heldPerRow, loadPerRow float64
	loadHeld               int64
	// heldSince holds what transactions changed of held while a restart
	// file's writer reads held (nil: it does not; see binding_persist.go).
	heldSince map[K][]any
}

func (b *binding[K, V]) tableName() string { return b.t.Name() }

func (b *binding[K, V]) beginLoad(shape rowShape) {
	b.loading, b.shape, b.checked = map[K]V{}, shape, 0
	b.heldLoading = nil
	if len(shape.held) > 0 {
		b.heldLoading = map[K][]any{}
	}
}

// keyOf calls the key function; a panic in it is an error of the row.
func (b *binding[K, V]) keyOf(r Row) (k K, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("key: the key function panicked: %v", p)
		}
	}()
	if k, err = b.key(r); err != nil {
		return k, fmt.Errorf("key: %w", err)
	}
	return k, nil
}

// valueOf calls the decode function; a panic in it is an error of the row.
func (b *binding[K, V]) valueOf(k K, r Row) (v V, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("row with key %v: the decode function panicked: %v", k, p)
		}
	}()
	if v, err = b.decode(r); err != nil {
		return v, fmt.Errorf("row with key %v: %w", k, err)
	}
	return v, nil
}

func (b *binding[K, V]) loadRow(r Row) error {
	k, err := b.keyOf(r)
	if err != nil {
		return err
	}
	if b.checked < keyChecks && b.shape.identity != nil {
		b.checked++
		if err := b.checkIdentityKey(k, r); err != nil {
			return err
		}
	}
	if _, dup := b.loading[k]; dup {
		return fmt.Errorf("key %v is on two rows: a key must identify one row", k)
	}
	if vals := b.heldValues(r); vals != nil {
		b.heldLoading[k] = vals
	}
	v, err := b.valueOf(k, r)
	if err != nil {
		return err
	}
	b.loading[k] = v
	return b.loadWithinBudget()
}

// budgetCheckEvery is how many rows of a load go by between two checks
// of a table's memory budget; the estimate per row is renewed at each
// power of two.
const budgetCheckEvery = 256

// loadWithinBudget fails a load once its rows pass the table's budget,
// before they all are in memory.
func (b *binding[K, V]) loadWithinBudget() error {
	n := len(b.loading)
	if b.t.memory.max <= 0 || n%budgetCheckEvery != 0 {
		return nil
	}
	if n&(n-1) == 0 || b.loadPerRow == 0 {
		b.loadPerRow = rowBytes(b.loading, len(b.t.indexes))
		b.heldPerRow = perHeldRow(b.heldLoading)
	}
	return b.t.memory.check(b.t.Name(), n, b.loadPerRow, int64(b.heldPerRow*float64(len(b.heldLoading))))
}

// perHeldRow estimates the bytes per row of held values.
func perHeldRow[K comparable](held map[K][]any) float64 {
	if len(held) == 0 {
		return 0
	}
	return float64(heldBytes(held)) / float64(len(held))
}

// overBudget fails if the pending transaction would make the table pass
// its budget: it counts each upsert as a new row, at the table's last
// estimate per row (or the pending rows' own, for an empty table).
func (b *binding[K, V]) overBudget() error {
	if b.t.memory.max <= 0 || len(b.pending) == 0 {
		return nil
	}
	rows := b.t.Len()
	if b.cleared {
		rows = 0
	}
	perRow := b.t.memory.rowBytes()
	var sample map[K]V
	for _, c := range b.pending {
		if c.Op != Upsert {
			continue
		}
		rows++
		if perRow == 0 && len(sample) < memorySample {
			if sample == nil {
				sample = map[K]V{}
			}
			sample[c.Key] = c.Value
		}
	}
	if perRow == 0 {
		perRow = rowBytes(sample, len(b.t.indexes))
	}
	return b.t.memory.check(b.t.Name(), rows, perRow, int64(b.heldPerRow*float64(len(b.held)+len(b.heldTx))))
}

// checkIdentityKey checks that the key of the row r is k also from the
// identity columns alone, as a delete would give them.
func (b *binding[K, V]) checkIdentityKey(k K, r Row) error {
	id := make(Row, len(b.shape.identity))
	for _, c := range b.shape.identity {
		id[c] = r[c]
	}
	got, err := b.keyOf(id)
	if err != nil || got != k {
		return fmt.Errorf("%w: a delete carries only %v (the table's replica identity); from them the key is %v (%v), from the whole row %v: make the key function read only those columns, or change the table's replica identity",
			errKeyNotFromIdentity, b.shape.identity, got, err, k)
	}
	return nil
}

func (b *binding[K, V]) finishLoad(commit time.Time) {
	b.t.replace(b.loading, commit)
	b.loading, b.loadPerRow = nil, 0
	b.held, b.heldLoading, b.heldSince = b.heldLoading, nil, nil
	b.heldPerRow = perHeldRow(b.held)
	b.t.memory.held.Store(int64(b.heldPerRow * float64(len(b.held))))
	b.heldTx = nil
	if b.held != nil {
		b.heldTx = map[K][]any{}
	}
}

// heldValues returns r's values of the held columns, nil if there are
// none or all are NULL.
func (b *binding[K, V]) heldValues(r Row) []any {
	var vals []any
	for i, c := range b.shape.held {
		if v := r[c]; v != nil {
			if vals == nil {
				vals = make([]any, len(b.shape.held))
			}
			vals[i] = v
		}
	}
	return vals
}

// heldRow returns the held values of the row with key k as the pending
// transaction left them.
func (b *binding[K, V]) heldRow(k K) ([]any, bool) {
	if vals, ok := b.heldTx[k]; ok {
		return vals, vals != nil
	}
	if b.cleared {
		return nil, false
	}
	if vals, ok := b.heldSince[k]; ok {
		return vals, vals != nil
	}
	vals, ok := b.held[k]
	return vals, ok
}

func (b *binding[K, V]) hold(k K, r Row) {
	if b.heldTx != nil {
		b.heldTx[k] = b.heldValues(r)
	}
}

func (b *binding[K, V]) unhold(k K) {
	if b.heldTx != nil {
		b.heldTx[k] = nil
	}
}

func (b *binding[K, V]) upsert(r Row) error {
	k, err := b.keyOf(r)
	if err != nil {
		return err
	}
	b.hold(k, r)
	v, err := b.valueOf(k, r)
	if err != nil {
		return err
	}
	b.pending = append(b.pending, Change[K, V]{Op: Upsert, Key: k, Value: v})
	return nil
}

// update applies an update: new is the row after it, old the row before
// (only its identity columns unless the table's replica identity is
// FULL), or nil when the key did not change and the source does not send
// it. The columns in unchanged kept their values and new lacks them:
// they come from the replica's copy of the row. The old key is deleted
// only if the key changed, and only once the new row has decoded: a row
// that fails to decode leaves the replica's copy as it was.
func (b *binding[K, V]) update(old, new Row, unchanged []string) error {
	k, err := b.keyOf(new)
	if err != nil {
		return err
	}
	oldKey := k
	if old != nil {
		if oldKey, err = b.keyOf(old); err != nil {
			return fmt.Errorf("old row: %w", err)
		}
	}
	if len(unchanged) > 0 {
		vals, ok := b.heldRow(oldKey)
		if !ok {
			return fmt.Errorf("row with key %v, columns %v: %w", oldKey, unchanged, errUnchangedMissing)
		}
		for _, c := range unchanged {
			i := slices.Index(b.shape.held, c)
			if i < 0 {
				return fmt.Errorf("row with key %v, column %s: %w", oldKey, c, errUnchangedMissing)
			}
			new[c] = vals[i]
		}
	}
	// The held values follow the source's row, whether it decodes or not.
	if oldKey != k {
		b.unhold(oldKey)
	}
	b.hold(k, new)
	v, err := b.valueOf(k, new)
	if err != nil {
		return err
	}
	if oldKey != k {
		b.pending = append(b.pending, Change[K, V]{Op: Delete, Key: oldKey})
	}
	b.pending = append(b.pending, Change[K, V]{Op: Upsert, Key: k, Value: v})
	return nil
}

func (b *binding[K, V]) remove(r Row) error {
	k, err := b.keyOf(r)
	if err != nil {
		return fmt.Errorf("key of a deleted row: %w", err)
	}
	b.unhold(k)
	b.pending = append(b.pending, Change[K, V]{Op: Delete, Key: k})
	return nil
}

func (b *binding[K, V]) truncate() {
	b.pending, b.cleared = nil, true
	clear(b.heldTx)
}

// flush makes the transaction's changes visible at once.
func (b *binding[K, V]) flush(commit time.Time) {
	for i := range b.pending {
		b.pending[i].Commit = commit
	}
	if b.cleared {
		b.t.truncateApply(b.pending, commit)
	} else {
		b.t.apply(b.pending)
	}
	b.commitHeld()
	b.t.memory.held.Store(int64(b.heldPerRow * float64(len(b.held))))
	b.cleared = false
	clear(b.pending)
	b.pending = b.pending[:0]
}

// commitHeld makes the transaction's held values part of held.
func (b *binding[K, V]) commitHeld() {
	if b.held == nil {
		return
	}
	if b.cleared {
		b.clearHeld()
	}
	for k, vals := range b.heldTx {
		if b.heldSince != nil {
			b.heldSince[k] = vals
			continue
		}
		if vals == nil {
			delete(b.held, k)
		} else {
			b.held[k] = vals
		}
	}
	clear(b.heldTx)
}

// reset forgets a transaction (or a load) that was only partly received:
// its connection broke before the commit. A resumed stream sends the
// transaction again from its start; after a resync the snapshot has it.
// Either way its rows (and a TRUNCATE) must not be applied later.
func (b *binding[K, V]) reset() {
	clear(b.pending)
	b.pending, b.cleared, b.loading, b.heldLoading = b.pending[:0], false, nil, nil
	clear(b.heldTx)
}

func (b *binding[K, V]) setReady(err error) { b.t.setReady(err) }

func (b *binding[K, V]) freshness() *freshness { return &b.t.freshness }
