package replica

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestMemoryEstimate holds the estimate of Stats.Bytes against the live
// heap a table adds, measured across its load: within a quarter for
// tables of several sizes, with and without an index. (The measured
// delta is this test's own, on a heap that other tests of the package
// have left idle: the rows are tens of megabytes, so others' stray
// allocations do not move it by much.)
func TestMemoryEstimate(t *testing.T) {
	for _, n := range []int{20_000, 150_000, 300_000} {
		for _, indexed := range []bool{false, true} {
			if indexed && n > 150_000 {
				continue // its B-tree's inserts take seconds under -race
			}
			t.Run(fmt.Sprintf("rows=%d/index=%v", n, indexed), func(t *testing.T) {
				before := heapInUse()
				tb := NewTable[int, customer]("customers")
				if indexed {
					NewIndex(tb, byRegionName)
				}
				rows := map[int]customer{}
				for i := range n {
					rows[i] = customer{ID: i, Name: fmt.Sprintf("customer number %d", i), Region: fmt.Sprintf("region %d", i%50)}
				}
				tb.replace(rows, time.Time{})
				rows = nil
				measured := heapInUse() - before
				st := tb.Stats()
				runtime.KeepAlive(tb)
				ratio := float64(st.Bytes) / float64(measured)
				t.Logf("estimate %d bytes (%.1f a row), measured %d (%.1f a row): %.2f", st.Bytes, st.BytesPerRow, measured, float64(measured)/float64(n), ratio)
				if ratio < 0.75 || ratio > 1.25 {
					t.Errorf("the estimate is %.2f times the heap the table holds, want within 0.75..1.25", ratio)
				}
			})
		}
	}
}
