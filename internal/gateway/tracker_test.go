package gateway

import (
	"fmt"
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

// BenchmarkTrackerSlidingWindow keeps window offsets delivered and acks
// the oldest one per operation, so every ack moves the commit point: the
// cost of an ack at a client's max-unacked (up to 100,000).
func BenchmarkTrackerSlidingWindow(b *testing.B) {
	for _, window := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			tr := newPartitionTracker()
			for o := range int64(window) {
				tr.deliver(o, 0)
			}
			next, oldest := int64(window), int64(0)
			for b.Loop() {
				tr.ack(oldest)
				oldest++
				tr.deliver(next, 0)
				next++
			}
		})
	}
}

// TestTrackerMatchesModel drives the tracker and a plain model with the
// same random deliveries and acks, and checks what the subscription reads
// from it after every step, and that its ring follows the window.
func TestTrackerMatchesModel(t *testing.T) {
	for trial := range 100 {
		r := rand.New(rand.NewPCG(uint64(trial), 2))
		tr := newPartitionTracker()
		type entry struct {
			off   int64
			acked bool
		}
		var window []entry // the model: held offsets in order
		commit, next := int64(-1), int64(0)
		for step := range 2000 {
			if len(window) == 0 || r.IntN(3) > 0 && len(window) < 300 {
				next += 1 + r.Int64N(2)
				tr.deliver(next, 0)
				window = append(window, entry{off: next})
			} else {
				i := r.IntN(len(window))
				if r.IntN(4) == 0 {
					i = 0 // move the commit point often
				}
				ok, released := tr.ack(window[i].off)
				if ok == window[i].acked {
					t.Fatalf("trial %d step %d: ack of %d reported %v, acked before: %v", trial, step, window[i].off, ok, window[i].acked)
				}
				window[i].acked = true
				n := 0
				for n < len(window) && window[n].acked {
					commit = window[n].off + 1
					n++
				}
				window = window[n:]
				if released != n {
					t.Fatalf("trial %d step %d: released %d, want %d", trial, step, released, n)
				}
			}
			unacked := 0
			for _, e := range window {
				if !e.acked {
					unacked++
				}
			}
			first, ok := tr.first()
			if tr.held() != len(window) || tr.unacked() != unacked || tr.commit != commit ||
				ok != (len(window) > 0) || ok && first != window[0].off {
				t.Fatalf("trial %d step %d: held %d unacked %d commit %d first %d/%v; model %d %d %d %v",
					trial, step, tr.held(), tr.unacked(), tr.commit, first, ok, len(window), unacked, commit, window)
			}
			if len(tr.ring) > max(minRing, 4*tr.held()) {
				t.Fatalf("trial %d step %d: ring of %d for %d held offsets", trial, step, len(tr.ring), tr.held())
			}
		}
		tr.reset()
		if tr.held() != 0 || tr.commit != commit {
			t.Fatalf("reset: held %d commit %d, want 0 and %d", tr.held(), tr.commit, commit)
		}
	}
}

// The oldest unacked message's delivery time follows the window's front:
// a response's time until every message of it before the front is acked.
func TestTrackerOldestUnacked(t *testing.T) {
	tr := newPartitionTracker()
	if _, ok := tr.oldestUnacked(); ok {
		t.Fatal("an empty tracker has an oldest unacked message")
	}
	for o := int64(0); o < 5; o++ {
		tr.deliver(o, 0)
		tr.stamp(100)
	}
	for o := int64(5); o < 10; o++ {
		tr.deliver(o, 0)
		tr.stamp(200)
	}
	want := func(step string, at int64, held bool) {
		t.Helper()
		got, ok := tr.oldestUnacked()
		if ok != held || got != at {
			t.Fatalf("%s: oldest unacked sent at %d (%v), want %d (%v); marks %v", step, got, ok, at, held, tr.marks)
		}
	}
	want("delivered", 100, true)
	for _, o := range []int64{1, 2, 3, 4} {
		tr.ack(o)
	}
	want("the first response's first message unacked", 100, true)
	tr.ack(0)
	want("the first response acked", 200, true)
	tr.ack(6)
	want("acked past a gap", 200, true)
	tr.ack(5)
	want("the second response half acked", 200, true)
	if len(tr.marks) != 1 {
		t.Fatalf("marks %v, want the second response's alone", tr.marks)
	}
	for _, o := range []int64{7, 8, 9} {
		tr.ack(o)
	}
	want("all acked", 0, false)
	tr.deliver(10, 0)
	tr.stamp(300)
	tr.reset()
	want("reset", 0, false)
}

// TestTrackerWaitingOffsets: a nacked offset holds the commit point, is
// not counted unacked, ignores acks, and leaves the window once acked as
// a dead letter.
func TestTrackerWaitingOffsets(t *testing.T) {
	tr := newPartitionTracker()
	for o := range int64(4) {
		tr.deliver(o, 0)
	}
	if !tr.nack(1) || tr.nack(1) || tr.nack(9) {
		t.Fatal("nack: want true once for a held unacked offset, false for a repeat or an unknown one")
	}
	for _, o := range []int64{0, 2, 3} {
		tr.ack(o)
	}
	if ok, _ := tr.ack(1); ok {
		t.Error("an ack of a waiting offset was taken")
	}
	if tr.commit != 1 || tr.unacked() != 0 || tr.held() != 3 {
		t.Fatalf("commit %d, unacked %d, held %d: want 1, 0, 3 (the waiting offset holds the commit)", tr.commit, tr.unacked(), tr.held())
	}
	if !tr.redeliver(1) || tr.unacked() != 1 || tr.redeliver(1) {
		t.Fatal("redeliver: want the waiting offset unacked again, once")
	}
	tr.nack(1)
	if ok, released := tr.ackWaiting(1); !ok || released != 3 || tr.commit != 4 {
		t.Fatalf("ackWaiting: ok %v, released %d, commit %d: want true, 3, 4", ok, released, tr.commit)
	}
}
