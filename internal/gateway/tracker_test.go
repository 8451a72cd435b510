package gateway

import (
	"math/rand/v2"
	"testing"
)

func TestTrackerCommitsOnlyTheAckedPrefix(t *testing.T) {
	tests := []struct {
		name      string
		delivered []int64
		acks      []int64
		want      int64 // commit point; -1 = nothing to commit
		unacked   int
	}{
		{"nothing acked", []int64{0, 1, 2}, nil, -1, 3},
		{"in order", []int64{0, 1, 2}, []int64{0, 1}, 2, 1},
		{"all", []int64{0, 1, 2}, []int64{0, 1, 2}, 3, 0},
		{"gap holds the commit", []int64{0, 1, 2, 3}, []int64{0, 2, 3}, 1, 1},
		{"gap filled last", []int64{0, 1, 2, 3}, []int64{3, 2, 0, 1}, 4, 0},
		{"first unacked holds all", []int64{5, 6, 7}, []int64{6, 7}, -1, 1},
		{"skipping offsets (compaction)", []int64{10, 13, 17}, []int64{10, 13}, 14, 1},
		{"unknown and repeated acks change nothing", []int64{0, 1}, []int64{9, 0, 0}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newPartitionTracker()
			for _, o := range tt.delivered {
				tr.deliver(o, 0)
			}
			for _, o := range tt.acks {
				tr.ack(o)
			}
			if tr.commit != tt.want || tr.unacked() != tt.unacked {
				t.Fatalf("commit %d unacked %d, want %d and %d", tr.commit, tr.unacked(), tt.want, tt.unacked)
			}
		})
	}
}

// TestTrackerNeverPassesAnUnackedOffset acks random subsets in random
// order and checks the invariant after every ack.
func TestTrackerNeverPassesAnUnackedOffset(t *testing.T) {
	for trial := range 200 {
		r := rand.New(rand.NewPCG(uint64(trial), 1))
		tr := newPartitionTracker()
		var delivered []int64
		off := int64(0)
		for range 50 {
			off += 1 + r.Int64N(3)
			delivered = append(delivered, off)
			tr.deliver(off, 0)
		}
		acked := map[int64]bool{}
		for _, i := range r.Perm(len(delivered))[:r.IntN(len(delivered)+1)] {
			tr.ack(delivered[i])
			acked[delivered[i]] = true
			for _, d := range delivered {
				if d < tr.commit && !acked[d] {
					t.Fatalf("trial %d: commit %d passes unacked offset %d", trial, tr.commit, d)
				}
			}
		}
	}
}
