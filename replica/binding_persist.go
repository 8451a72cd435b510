package replica

import (
	"encoding"
	"encoding/gob"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// How a binding writes its table to a restart file and reads it back
// (see "Restart from disk" in the package doc). Keys and values are
// written with encoding/gob as decode made them, so a start from the file
// runs no decode function; the values a binding holds of columns that
// may be stored out of line are written as the text the source decodes,
// by codecs the source gives (they depend on the columns' types).

// persistChunk is how many rows go in one gob value: one Encode per row
// would cost more than the rows themselves.
const persistChunk = 4096

// persistRow is one row of a restart file.
type persistRow[K comparable, V any] struct {
	Key   K
	Value V
	// Held is the row's held values as text (nil: none are kept; a nil
	// element: NULL).
	Held [][]byte
}

// persistChunkOf is a run of rows; the last one of a table is empty.
type persistChunkOf[K comparable, V any] struct{ Rows []persistRow[K, V] }

// tableImage is a binding's table as of one point of the stream: the
// table's immutable version and a copy of the held values. Taken on the
// applier's goroutine between transactions, written on another.
type tableImage interface {
	rows() int
	write(enc *gob.Encoder, held func([]any) ([][]byte, error)) error
}

type tableImageOf[K comparable, V any] struct {
	ver  *version[K, V]
	held map[K][]any
}

// image takes the table's current version (no copy: versions are never
// changed) and its held values, which the applier changes in place
// otherwise: until thawHeld, it records their changes in heldSince
// instead, so the writer reads them unchanged and the applier copies
// nothing (a copy of a million rows' values took 0.2 s).
func (b *binding[K, V]) image() tableImage {
	img := &tableImageOf[K, V]{ver: b.t.cur.Load(), held: b.held}
	if b.held != nil {
		b.heldSince = map[K][]any{}
	}
	return img
}

// thawHeld makes held the applier's own again once the writer is done
// with it: the changes made meanwhile go into it.
func (b *binding[K, V]) thawHeld() {
	if b.heldSince == nil {
		return
	}
	for k, vals := range b.heldSince {
		if vals == nil {
			delete(b.held, k)
		} else {
			b.held[k] = vals
		}
	}
	b.heldSince = nil
}

// clearHeld empties held for a TRUNCATE: a new map if a writer may be
// reading the old one.
func (b *binding[K, V]) clearHeld() {
	if b.heldSince != nil {
		b.held, b.heldSince = map[K][]any{}, nil
		return
	}
	clear(b.held)
}

func (img *tableImageOf[K, V]) rows() int { return img.ver.n }

func (img *tableImageOf[K, V]) write(enc *gob.Encoder, held func([]any) ([][]byte, error)) error {
	chunk := persistChunkOf[K, V]{Rows: make([]persistRow[K, V], 0, persistChunk)}
	flush := func() error {
		err := enc.Encode(&chunk)
		chunk.Rows = chunk.Rows[:0]
		return err
	}
	var err error
	img.ver.each(func(k K, v V) bool {
		r := persistRow[K, V]{Key: k, Value: v}
		if vals, ok := img.held[k]; ok {
			if r.Held, err = held(vals); err != nil {
				err = fmt.Errorf("row with key %v: %w", k, err)
				return false
			}
		}
		chunk.Rows = append(chunk.Rows, r)
		if len(chunk.Rows) == persistChunk {
			err = flush()
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if len(chunk.Rows) > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	return flush() // the empty chunk that ends the table
}

// restore reads a table written by write and swaps it in, as a load
// would. It reads at most limit rows: the file said how many it holds.
func (b *binding[K, V]) restore(dec *gob.Decoder, limit int, held func([][]byte) ([]any, error), commit time.Time) error {
	rows := make(map[K]V, limit)
	var heldRows map[K][]any
	if len(b.shape.held) > 0 {
		heldRows = map[K][]any{}
	}
	for {
		var chunk persistChunkOf[K, V]
		if err := dec.Decode(&chunk); err != nil {
			return fmt.Errorf("table %s: %w", b.t.Name(), err)
		}
		if len(chunk.Rows) == 0 {
			break
		}
		for _, r := range chunk.Rows {
			if len(rows) >= limit {
				return fmt.Errorf("table %s: more rows than the file's header says (%d)", b.t.Name(), limit)
			}
			rows[r.Key] = r.Value
			if r.Held != nil && heldRows != nil {
				vals, err := held(r.Held)
				if err != nil {
					return fmt.Errorf("table %s, row with key %v: %w", b.t.Name(), r.Key, err)
				}
				heldRows[r.Key] = vals
			}
		}
	}
	if len(rows) != limit {
		return fmt.Errorf("table %s: %d rows, the file's header says %d", b.t.Name(), len(rows), limit)
	}
	// A file is held to the table's memory budget as a load is; the
	// source then falls back to a load, which ends Run if it passes too.
	heldPerRow := perHeldRow(heldRows)
	heldBytes := int64(heldPerRow * float64(len(heldRows)))
	if err := b.t.memory.check(b.t.Name(), len(rows), rowBytes(rows, len(b.t.indexes)), heldBytes); err != nil {
		return err
	}
	b.reset()
	b.t.replace(rows, commit)
	b.held, b.heldTx, b.heldSince = heldRows, nil, nil
	b.heldPerRow = heldPerRow
	b.t.memory.held.Store(heldBytes)
	if b.held != nil {
		b.heldTx = map[K][]any{}
	}
	return nil
}

// setShape sets the shape of the rows the stream will carry, as a load
// does, before a restore.
func (b *binding[K, V]) setShape(shape rowShape) { b.shape = shape }

// valueTypes describes the key and value types as encoding/gob writes
// them, or says why gob cannot write them whole: a restart file of
// values that lost a field would serve wrong rows as Ready. The
// description is kept in the file, so a value type that changed between
// builds makes the file not fit.
func (b *binding[K, V]) valueTypes() (string, error) {
	var k K
	var v V
	ks, err := gobType(reflect.TypeOf(&k).Elem(), map[reflect.Type]bool{})
	if err != nil {
		return "", fmt.Errorf("the key type of table %s: %w", b.t.Name(), err)
	}
	vs, err := gobType(reflect.TypeOf(&v).Elem(), map[reflect.Type]bool{})
	if err != nil {
		return "", fmt.Errorf("the value type of table %s: %w", b.t.Name(), err)
	}
	// What gob itself refuses (a struct with no exported field).
	if err := gob.NewEncoder(io.Discard).Encode(persistChunkOf[K, V]{Rows: []persistRow[K, V]{{Key: k, Value: v}}}); err != nil {
		return "", fmt.Errorf("table %s: %w", b.t.Name(), err)
	}
	return ks + " -> " + vs, nil
}

var (
	gobEncoderType    = reflect.TypeFor[gob.GobEncoder]()
	binaryMarshalType = reflect.TypeFor[encoding.BinaryMarshaler]()
)

// gobType describes t's structure, failing for what gob would silently
// drop (unexported fields) or cannot write (functions, channels,
// interfaces, whose concrete types gob needs registered).
func gobType(t reflect.Type, seen map[reflect.Type]bool) (string, error) {
	if t.Implements(gobEncoderType) || t.Implements(binaryMarshalType) ||
		reflect.PointerTo(t).Implements(gobEncoderType) || reflect.PointerTo(t).Implements(binaryMarshalType) {
		return t.String(), nil // it writes itself (time.Time, big.Int)
	}
	if seen[t] {
		return t.String(), nil
	}
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Interface, reflect.Complex64, reflect.Complex128:
		return "", fmt.Errorf("%s is a %s, which encoding/gob cannot write without help: use concrete types, or implement GobEncoder", t, t.Kind())
	case reflect.Pointer, reflect.Slice, reflect.Array:
		s, err := gobType(t.Elem(), seen)
		return t.Kind().String() + " " + s, err
	case reflect.Map:
		ks, err := gobType(t.Key(), seen)
		if err != nil {
			return "", err
		}
		vs, err := gobType(t.Elem(), seen)
		return "map[" + ks + "]" + vs, err
	case reflect.Struct:
		seen[t] = true
		parts := make([]string, 0, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				return "", fmt.Errorf("%s has the unexported field %s, which encoding/gob does not write: export it, or implement GobEncoder", t, f.Name)
			}
			s, err := gobType(f.Type, seen)
			if err != nil {
				return "", err
			}
			parts = append(parts, f.Name+" "+s)
		}
		return t.String() + "{" + strings.Join(parts, "; ") + "}", nil
	default:
		return t.Kind().String(), nil
	}
}
