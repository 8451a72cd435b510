package replica

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkApplyOne is the applier's cost of one single-row transaction
// (an update) on an indexed table, in the steady state where the delta
// keeps filling and merging: what bounds how many transactions per second
// a replica keeps up with. Before merging at sqrt(rows) (it was rows/8),
// it was ~150 µs at 20,000 rows and ~3 ms at 200,000.
func BenchmarkApplyOne(b *testing.B) {
	for _, n := range []int{1000, 20_000, 200_000} {
		b.Run("rows="+strconv.Itoa(n), func(b *testing.B) {
			tb := NewTable[int, customer]("c")
			NewIndex(tb, byRegionName)
			rows := make(map[int]customer, n)
			for i := range n {
				rows[i] = customer{ID: i, Name: "n" + strconv.Itoa(i), Region: "r" + strconv.Itoa(i%32)}
			}
			tb.replace(rows, time.Time{})
			changes := make([]Change[int, customer], 1)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				changes[0] = up(customer{ID: (i * 7919) % n, Name: "x" + strconv.Itoa(i), Region: "r1"})
				tb.apply(changes)
				i++
			}
		})
	}
}

func TestMergeAt(t *testing.T) {
	for _, tt := range []struct{ rows, want int }{{0, 64}, {1000, 64}, {20_000, 141}, {1_000_000, 1000}} {
		if got := mergeAt(tt.rows); got != tt.want {
			t.Errorf("mergeAt(%d) = %d, want %d", tt.rows, got, tt.want)
		}
	}
}
