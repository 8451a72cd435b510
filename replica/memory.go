package replica

import (
	"math"
	"reflect"
	"slices"
	"sync/atomic"
)

// A table's memory is estimated, not measured: the heap is shared by the
// whole process, so no delta of it can be told apart from other
// goroutines' allocations. The estimate walks a sample of the rows by
// reflection when a table is loaded and each time its delta is merged
// (never on a read), and adds what the table's structures cost per row.
// See "Memory" in the package doc for what it counts and its error.

// tableMemory is a table's memory estimate and budget.
type tableMemory struct {
	max int64
	// perRow is the estimated bytes per row of the table's own
	// structures (float64 bits); held, of the binding's copies of values
	// stored out of line (all rows).
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

// memorySample is how many rows an estimate walks.
const memorySample = 256

// goSizeClasses are the Go allocator's size classes up to 32 KiB
// (runtime/sizeclasses.go): an allocation takes the smallest that fits.
var goSizeClasses = []int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
	2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880,
	12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocSize is what the Go allocator takes for an object of n bytes.
func allocSize(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if i, _ := slices.BinarySearch(goSizeClasses, n); i < len(goSizeClasses) {
		return goSizeClasses[i]
	}
	const page = 8192
	return (n + page - 1) / page * page
}

// mapLoad is the mean fill of a Go map's slots: a table grows (doubles)
// when 7/8 full, so its fill runs from 7/16 to 7/8 as rows arrive; a
// measured mean over table sizes is about 0.65 (TestMemoryEstimate).
const mapLoad = 0.65

// mapEntryBytes is what one entry of a map[K]V takes in the map itself:
// its slot (key and value, each by pointer when larger than 128 bytes,
// as the runtime stores them) and its control byte, over the mean fill.
func mapEntryBytes(k, v reflect.Type) float64 {
	slot := func(t reflect.Type) int64 {
		if t.Size() > 128 {
			return 8 + allocSize(int64(t.Size()))
		}
		return int64(t.Size())
	}
	return float64(slot(k)+slot(v)+1) / mapLoad
}

// outOfLine estimates the heap bytes v references beyond its own inline
// size: string bytes, slice arrays, pointed-to values, boxed interface
// values, maps. seen holds the addresses already counted, so what rows
// share (a *time.Location, a shared string) counts once per sample.
func outOfLine(v reflect.Value, seen map[uintptr]bool) int64 {
	switch v.Kind() {
	case reflect.String:
		if v.Len() == 0 {
			return 0
		}
		p := v.UnsafePointer()
		if seen[uintptr(p)] {
			return 0
		}
		seen[uintptr(p)] = true
		return allocSize(int64(v.Len()))
	case reflect.Slice:
		if v.IsNil() || v.Cap() == 0 {
			return 0
		}
		if seen[v.Pointer()] {
			return 0
		}
		seen[v.Pointer()] = true
		n := allocSize(int64(v.Cap()) * int64(v.Type().Elem().Size()))
		for i := range v.Len() {
			n += outOfLine(v.Index(i), seen)
		}
		return n
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return 0
		}
		seen[v.Pointer()] = true
		return allocSize(int64(v.Type().Elem().Size())) + outOfLine(v.Elem(), seen)
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		e := v.Elem()
		switch e.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			return outOfLine(e, seen) // stored in the interface itself
		}
		return allocSize(int64(e.Type().Size())) + outOfLine(e, seen)
	case reflect.Struct:
		var n int64
		for i := range v.NumField() {
			n += outOfLine(v.Field(i), seen)
		}
		return n
	case reflect.Array:
		var n int64
		for i := range v.Len() {
			n += outOfLine(v.Index(i), seen)
		}
		return n
	case reflect.Map:
		if v.IsNil() || seen[v.Pointer()] {
			return 0
		}
		seen[v.Pointer()] = true
		n := int64(48 + float64(v.Len())*mapEntryBytes(v.Type().Key(), v.Type().Elem()))
		for it := v.MapRange(); it.Next(); {
			n += outOfLine(it.Key(), seen) + outOfLine(it.Value(), seen)
		}
		return n
	}
	return 0
}

// indexEntryBytes is what one row takes in an Index: a copy of the
// value in a B-tree node, whose item arrays are between half and all
// full (about 3/4 on average).
func indexEntryBytes(v reflect.Type) float64 { return float64(v.Size()) / 0.75 }

// rowBytes estimates the bytes per row of a table holding rows in base
// with indexes indexes: the map's entry, the out-of-line values of a
// sample of rows, and each index's entry.
func rowBytes[K comparable, V any](base map[K]V, indexes int) float64 {
	if len(base) == 0 {
		return 0
	}
	kt, vt := reflect.TypeFor[K](), reflect.TypeFor[V]()
	seen := map[uintptr]bool{}
	var sampled, out int64
	for k, v := range base { // map order is random: a fair sample
		out += outOfLine(reflect.ValueOf(&k).Elem(), seen) + outOfLine(reflect.ValueOf(&v).Elem(), seen)
		if sampled++; sampled == memorySample {
			break
		}
	}
	return mapEntryBytes(kt, vt) + float64(out)/float64(sampled) + float64(indexes)*indexEntryBytes(vt)
}

// heldBytes estimates the bytes a binding keeps for the held values of
// rows under a replica identity other than FULL (see "Tables" in the
// package doc): per row a map entry and a []any of len(held) values,
// each value boxed; the strings and byte slices themselves are shared
// with what decode kept of them, so they are not counted again.
func heldBytes[K comparable](held map[K][]any) int64 {
	if len(held) == 0 {
		return 0
	}
	per := mapEntryBytes(reflect.TypeFor[K](), reflect.TypeFor[[]any]())
	var sampled, out int64
	for _, vals := range held {
		out += allocSize(int64(cap(vals)) * 16)
		for _, v := range vals {
			switch v.(type) {
			case nil:
			case string:
				out += 16
			case []byte:
				out += 24
			default:
				out += allocSize(int64(reflect.TypeOf(v).Size()))
			}
		}
		if sampled++; sampled == memorySample {
			break
		}
	}
	return int64((per + float64(out)/float64(sampled)) * float64(len(held)))
}
