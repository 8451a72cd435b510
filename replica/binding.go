package replica

import (
	"fmt"
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
	beginLoad()
	loadRow(Row) error
	finishLoad(commit time.Time)
	upsert(Row) error
	remove(key Row) error
	truncate()
	flush(commit time.Time)
	reset()
	setReady(error)
}

// Bind binds the source table t.Name() ("schema.table" or "table" for
// public; a collection name for MongoDB) to t. key extracts the primary
// key from a row (deletes carry only the key columns); decode builds the
// value. A row that fails either is counted and logged with its key, never
// applied, and never stops the applier.
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
}

func (b *binding[K, V]) tableName() string { return b.t.Name() }
func (b *binding[K, V]) beginLoad()        { b.loading = map[K]V{} }

func (b *binding[K, V]) decodeRow(r Row) (K, V, error) {
	var zero V
	k, err := b.key(r)
	if err != nil {
		return k, zero, fmt.Errorf("key: %w", err)
	}
	v, err := b.decode(r)
	if err != nil {
		return k, zero, fmt.Errorf("row with key %v: %w", k, err)
	}
	return k, v, nil
}

func (b *binding[K, V]) loadRow(r Row) error {
	k, v, err := b.decodeRow(r)
	if err != nil {
		return err
	}
	b.loading[k] = v
	return nil
}

func (b *binding[K, V]) finishLoad(commit time.Time) {
	b.t.replace(b.loading, commit)
	b.loading = nil
}

func (b *binding[K, V]) upsert(r Row) error {
	k, v, err := b.decodeRow(r)
	if err != nil {
		return err
	}
	b.pending = append(b.pending, Change[K, V]{Op: Upsert, Key: k, Value: v})
	return nil
}

func (b *binding[K, V]) remove(r Row) error {
	k, err := b.key(r)
	if err != nil {
		return fmt.Errorf("key of a deleted row: %w", err)
	}
	b.pending = append(b.pending, Change[K, V]{Op: Delete, Key: k})
	return nil
}

func (b *binding[K, V]) truncate() {
	b.pending, b.cleared = nil, true
}

// flush makes the transaction's changes visible at once.
func (b *binding[K, V]) flush(commit time.Time) {
	for i := range b.pending {
		b.pending[i].Commit = commit
	}
	if b.cleared {
		b.t.truncateApply(b.pending, commit)
		b.cleared = false
	} else {
		b.t.apply(b.pending)
	}
	clear(b.pending)
	b.pending = b.pending[:0]
}

// reset forgets a transaction (or a load) that was only partly received:
// its connection broke before the commit. A resumed stream sends the
// transaction again from its start; after a resync the snapshot has it.
// Either way its rows (and a TRUNCATE) must not be applied later.
func (b *binding[K, V]) reset() {
	clear(b.pending)
	b.pending, b.cleared, b.loading = b.pending[:0], false, nil
}

func (b *binding[K, V]) setReady(err error) { b.t.setReady(err) }
