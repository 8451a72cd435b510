package replica

import (
	"context"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
)

// Table is an in-memory copy of a database table, kept fresh by a source
// (PostgresSource, MongoSource). Reads are lock-free: they load the
// current immutable version with one atomic read and never wait for the
// applier, which builds the next version beside it and publishes it
// atomically. A Get that hits allocates nothing.
type Table[K comparable, V any] struct {
	name string
	cur  atomic.Pointer[version[K, V]]

	writeMu sync.Mutex // one applier at a time
	indexes []indexWriter[K, V]
	hooks   []func(Change[K, V])

	state
	freshness freshness
	applied   atomic.Int64 // changes applied since the start
	lastLag   atomic.Int64 // nanoseconds, commit -> visible, of the last batch
	lastTime  atomic.Int64 // unix nanos of the last applied commit

	memory tableMemory
}

// version is one immutable state of a table: a base map plus a small delta
// of changes since the base was built. Merging the delta into a new base
// only when it grows keeps each write cheap (copying the delta, not the
// table) while reads stay two map lookups at worst.
type version[K comparable, V any] struct {
	base    map[K]V
	delta   map[K]entry[V]
	n       int
	indexes []any // *btree.BTreeG[V], frozen clones, by index position
}

type entry[V any] struct {
	v       V
	deleted bool
}

// NewTable returns an empty table that is not ready until a source loads
// it. Options: MaxBytes.
func NewTable[K comparable, V any](name string, opts ...TableOption) *Table[K, V] {
	t := &Table[K, V]{name: name}
	for _, o := range opts {
		o(&t.memory)
	}
	t.state.init()
	t.freshness.made = time.Now()
	t.cur.Store(&version[K, V]{base: map[K]V{}, delta: map[K]entry[V]{}})
	return t
}

// Name is the table's name (the source table it copies).
func (t *Table[K, V]) Name() string { return t.name }

// Get returns the row with key k.
func (t *Table[K, V]) Get(k K) (V, bool) {
	ver := t.cur.Load()
	// Most versions have an empty delta (right after a load or a merge);
	// skipping it saves hashing the key twice, half of a Get's time.
	if len(ver.delta) > 0 {
		if e, ok := ver.delta[k]; ok {
			if e.deleted {
				var zero V
				return zero, false
			}
			return e.v, true
		}
	}
	v, ok := ver.base[k]
	return v, ok
}

// Len is the number of rows.
func (t *Table[K, V]) Len() int { return t.cur.Load().n }

// Range calls f for every row, in no particular order, until f returns
// false. It sees one consistent version of the table.
func (t *Table[K, V]) Range(f func(K, V) bool) { t.cur.Load().each(f) }

// each calls f for every row of the version until f returns false.
func (ver *version[K, V]) each(f func(K, V) bool) {
	for k, e := range ver.delta {
		if !e.deleted && !f(k, e.v) {
			return
		}
	}
	for k, v := range ver.base {
		if _, shadowed := ver.delta[k]; shadowed {
			continue
		}
		if !f(k, v) {
			return
		}
	}
}

// OnChange registers f to be called with every change after it became
// visible, on the applier's goroutine: f must be quick (hand work to your
// own goroutine). After a full resync f gets a Reload change.
func (t *Table[K, V]) OnChange(f func(Change[K, V])) {
	t.writeMu.Lock()
	t.hooks = append(t.hooks, f)
	t.writeMu.Unlock()
}

// Op is what a change does.
type Op int

const (
	Upsert Op = iota // insert or update Key to Value
	Delete           // delete Key
	Reload           // the whole table was replaced (a full resync)
)

// Change is one change to a table, with when its transaction committed.
type Change[K comparable, V any] struct {
	Op     Op
	Key    K
	Value  V
	Commit time.Time
}

// Stats are a table's counters.
type Stats struct {
	Rows       int
	Applied    int64         // changes applied since the start
	LastCommit time.Time     // commit time of the last applied change
	LastLag    time.Duration // its commit -> visible delay
	Age        time.Duration // since the source last confirmed it current (Table.Age)
	Ready      bool
	Err        error
	// Bytes estimates the memory the table holds, and BytesPerRow the
	// same per row: updated at each load and each merge of its recent
	// changes, never on a read (see "Memory" in the package doc).
	Bytes       int64
	BytesPerRow float64
}

// Stats returns the table's counters.
func (t *Table[K, V]) Stats() Stats {
	var last time.Time
	if n := t.lastTime.Load(); n > 0 {
		last = time.Unix(0, n)
	}
	rows := t.Len()
	bytes := t.memory.bytes(rows)
	var perRow float64
	if rows > 0 {
		perRow = float64(bytes) / float64(rows)
	}
	return Stats{
		Rows: rows, Applied: t.applied.Load(), LastCommit: last,
		LastLag: time.Duration(t.lastLag.Load()), Age: t.Age(), Ready: t.Ready(), Err: t.Err(),
		Bytes: bytes, BytesPerRow: perRow,
	}
}

// mergeAt is the delta size past which apply merges the delta into a new
// base. Each transaction copies the delta (d entries) and every d-th
// copies the base (n): about d + n/d entries per transaction, least at d
// = sqrt(n). An eighth of the table instead (the first design) cost a
// 20,000-row table ~150 µs and a 200,000-row one ~3 ms per single-row
// transaction, so 1,000 writes/s outran the applier.
func mergeAt(n int) int {
	return max(64, int(math.Sqrt(float64(n))))
}

// apply makes changes visible at once (one new version). The delta is
// merged into a new base when it passes mergeAt, so a write costs
// O(sqrt(rows)) amortized, and reads stay two map lookups at worst.
func (t *Table[K, V]) apply(changes []Change[K, V]) {
	if len(changes) == 0 {
		return
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	old := t.cur.Load()
	// maps.Clone copies the table's groups wholesale: several times faster
	// than re-inserting entry by entry.
	delta := maps.Clone(old.delta)
	if delta == nil {
		delta = make(map[K]entry[V], len(changes))
	}
	n := old.n
	get := func(k K) (V, bool) {
		if e, ok := delta[k]; ok {
			return e.v, !e.deleted
		}
		v, ok := old.base[k]
		return v, ok
	}
	for _, c := range changes {
		prev, existed := get(c.Key)
		switch c.Op {
		case Upsert:
			delta[c.Key] = entry[V]{v: c.Value}
			if !existed {
				n++
			}
			for _, ix := range t.indexes {
				if existed {
					ix.delete(prev)
				}
				ix.insert(c.Value)
			}
		case Delete:
			if !existed {
				continue
			}
			delta[c.Key] = entry[V]{deleted: true}
			n--
			for _, ix := range t.indexes {
				ix.delete(prev)
			}
		}
	}
	next := &version[K, V]{base: old.base, delta: delta, n: n}
	if len(delta) > mergeAt(len(old.base)) {
		base := maps.Clone(old.base)
		if base == nil {
			base = make(map[K]V, n)
		}
		for k, e := range delta {
			if e.deleted {
				delete(base, k)
			} else {
				base[k] = e.v
			}
		}
		next.base, next.delta = base, map[K]entry[V]{}
		if t.memory.dueAtMerge(len(base)) {
			t.memory.estimated(len(base), rowBytes(base, len(t.indexes)))
		}
	}
	next.indexes = t.freezeIndexes()
	t.cur.Store(next)
	t.memory.changes += len(changes)
	t.applied.Add(int64(len(changes)))
	last := changes[len(changes)-1].Commit
	if !last.IsZero() {
		t.lastTime.Store(last.UnixNano())
		t.lastLag.Store(int64(time.Since(last)))
	}
	for _, h := range t.hooks {
		for _, c := range changes {
			h(c)
		}
	}
}

// replace swaps in a whole new content at once: readers see the old table
// or the new one, never a mix or a half-loaded table.
func (t *Table[K, V]) replace(rows map[K]V, commit time.Time) { t.swap(rows, commit, nil) }

// truncateApply makes a transaction that truncated the table visible at
// once: the table becomes what the changes after the TRUNCATE make of an
// empty one, in one version, so readers never see it empty in between.
// Hooks get a Reload, then the changes.
func (t *Table[K, V]) truncateApply(changes []Change[K, V], commit time.Time) {
	rows := make(map[K]V)
	for _, c := range changes {
		switch c.Op {
		case Upsert:
			rows[c.Key] = c.Value
		case Delete:
			delete(rows, c.Key)
		}
	}
	t.swap(rows, commit, changes)
}

// swap publishes rows as the whole table, counting changes (which made
// it) as applied.
func (t *Table[K, V]) swap(rows map[K]V, commit time.Time, changes []Change[K, V]) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	for _, ix := range t.indexes {
		ix.reset()
		for _, v := range rows {
			ix.insert(v)
		}
	}
	t.cur.Store(&version[K, V]{base: rows, delta: map[K]entry[V]{}, n: len(rows), indexes: t.freezeIndexes()})
	t.memory.estimated(len(rows), rowBytes(rows, len(t.indexes)))
	if !commit.IsZero() {
		t.lastTime.Store(commit.UnixNano())
	}
	if len(changes) > 0 {
		t.applied.Add(int64(len(changes)))
		if !commit.IsZero() {
			t.lastLag.Store(int64(time.Since(commit)))
		}
	}
	for _, h := range t.hooks {
		h(Change[K, V]{Op: Reload, Commit: commit})
		for _, c := range changes {
			h(c)
		}
	}
}

func (t *Table[K, V]) freezeIndexes() []any {
	if len(t.indexes) == 0 {
		return nil
	}
	out := make([]any, len(t.indexes))
	for i, ix := range t.indexes {
		out[i] = ix.freeze()
	}
	return out
}

// indexWriter is an index's side owned by the applier.
type indexWriter[K comparable, V any] interface {
	insert(V)
	delete(V)
	reset()
	freeze() any
}

// Index orders a table's rows, for sorted and range reads (a plain map
// loses order: the report's caveat). Like the table, it is read lock-free
// from the current version.
type Index[K comparable, V any] struct {
	t    *Table[K, V]
	pos  int
	less func(a, b V) bool
	work *btree.BTreeG[V] // the applier's copy
}

// NewIndex adds an ordered index to t. less must order rows totally
// (break ties by the primary key): rows that compare equal collapse.
// Create indexes before the source starts.
func NewIndex[K comparable, V any](t *Table[K, V], less func(a, b V) bool) *Index[K, V] {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	ix := &Index[K, V]{t: t, pos: len(t.indexes), less: less, work: btree.NewG(32, less)}
	t.indexes = append(t.indexes, ix)
	old := t.cur.Load()
	for k, v := range old.base {
		if _, shadowed := old.delta[k]; !shadowed {
			ix.insert(v)
		}
	}
	for _, e := range old.delta {
		if !e.deleted {
			ix.insert(e.v)
		}
	}
	next := *old
	next.indexes = t.freezeIndexes()
	t.cur.Store(&next)
	return ix
}

func (ix *Index[K, V]) insert(v V) { ix.work.ReplaceOrInsert(v) }
func (ix *Index[K, V]) delete(v V) { ix.work.Delete(v) }
func (ix *Index[K, V]) reset()     { ix.work = btree.NewG(32, ix.less) }

// freeze returns a lazy copy-on-write clone for readers; the applier
// keeps writing to its own tree, which copies shared nodes as it goes.
func (ix *Index[K, V]) freeze() any { return ix.work.Clone() }

func (ix *Index[K, V]) tree() *btree.BTreeG[V] {
	return ix.t.cur.Load().indexes[ix.pos].(*btree.BTreeG[V])
}

// Ascend calls f for rows in index order until f returns false.
func (ix *Index[K, V]) Ascend(f func(V) bool) { ix.tree().Ascend(f) }

// AscendFrom calls f for rows ordered at or after pivot, in order, until f
// returns false. pivot is a row-shaped value that need not exist, e.g. a
// customer with only Region set to start a region's rows.
func (ix *Index[K, V]) AscendFrom(pivot V, f func(V) bool) {
	ix.tree().AscendGreaterOrEqual(pivot, f)
}

// Len is the number of rows in the index.
func (ix *Index[K, V]) Len() int { return ix.tree().Len() }

// WaitReady is a convenience for handlers: it waits until t is ready.
func (t *Table[K, V]) WaitReady(ctx context.Context) error { return t.state.waitReady(ctx) }
