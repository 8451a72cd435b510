package checker

import (
	"testing"
)

// TestPoisonIDs: the poison messages poisonIDs lists are those isPoison
// recognizes, K of them, on every stream, and no others.
func TestPoisonIDs(t *testing.T) {
	const streams, k = 10, 50
	ids := poisonIDs(streams, k)
	seen, onStream := map[ID]bool{}, map[int]bool{}
	for _, id := range ids {
		if seen[id] || !isPoison(id, streams, k) {
			t.Fatalf("%v listed twice, or not recognized as poison", id)
		}
		seen[id], onStream[id.Stream] = true, true
	}
	if len(seen) != k || len(onStream) != streams {
		t.Fatalf("%d poison messages on %d streams, want %d on %d", len(seen), len(onStream), k, streams)
	}
	n := 0
	for s := range streams {
		for seq := range int64(2 * poisonStride * k / streams) {
			if isPoison(ID{Stream: s, Seq: seq}, streams, k) {
				n++
			}
		}
	}
	if n != k || isPoison(ids[0], streams, 0) {
		t.Fatalf("%d messages recognized as poison, want %d (and none with 0 poison keys)", n, k)
	}
}

// TestNackedOnce: the nacked fraction is what was asked (the hash is
// fixed, so the count is too), the choice is the same every time, and
// a redelivery is never nacked.
func TestNackedOnce(t *testing.T) {
	for _, f := range []float64{0, 0.01, 0.5, 1} {
		n := 0
		for s := range 10 {
			for seq := range int64(10000) {
				id := ID{Stream: s, Seq: seq}
				first := nackedOnce(id, 1, f)
				if first != nackedOnce(id, 1, f) || first != nackedOnce(id, 0, f) {
					t.Fatalf("%v: not the same choice every time", id)
				}
				if nackedOnce(id, 2, f) || nackedOnce(id, 7, f) {
					t.Fatalf("%v nacked at a redelivery", id)
				}
				if first {
					n++
				}
			}
		}
		if got := float64(n) / 100000; got < f*0.9 || got > f*1.1 {
			t.Errorf("fraction %g: %d of 100,000 nacked", f, n)
		}
	}
}

// TestLedgerDeadLetters: with poison messages and dead letters, each
// message counts once across the topic and the dead-letter topic.
func TestLedgerDeadLetters(t *testing.T) {
	poison := []ID{{0, 0}, {1, 3}}
	tests := []struct {
		name                      string
		recv                      []ID
		dead                      []ID
		lost, dups, wrong, dlDist int64
	}{
		{"poison dead-lettered, the rest received", []ID{{0, 1}, {0, 2}, {1, 0}}, poison, 0, 0, 0, 2},
		{"a poison message not dead-lettered is lost", []ID{{0, 1}, {0, 2}, {1, 0}}, poison[:1], 1, 0, 0, 1},
		{"dead-lettered twice is a duplicate", []ID{{0, 1}, {0, 2}, {1, 0}}, append(poison, poison[1]), 0, 1, 0, 2},
		{"received and dead-lettered: a duplicate, and wrong", []ID{{0, 1}, {0, 2}, {1, 0}}, append(poison, ID{0, 2}), 0, 1, 1, 3},
		{"dead-lettered instead of received: wrong, not lost", []ID{{0, 1}, {1, 0}}, append(poison, ID{0, 2}), 0, 0, 1, 3},
		{"neither received nor dead-lettered", []ID{{0, 1}}, poison, 2, 0, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger(2, 1)
			l.setPoison(poison)
			l.ack(0, []ID{{0, 0}, {0, 1}, {0, 2}})
			l.ack(1, []ID{{1, 0}, {1, 3}})
			l.receive(0, tt.recv)
			for _, id := range tt.dead {
				l.deadLetter(0, id, 3)
			}
			r := l.check(0, 10)
			if r.lost != tt.lost || r.deadDuplicates != tt.dups || r.deadWrong != tt.wrong || r.deadLettered != tt.dlDist {
				t.Fatalf("lost %d, dead-letter duplicates %d, wrong %d, dead-lettered %d; want %d %d %d %d",
					r.lost, r.deadDuplicates, r.deadWrong, r.deadLettered, tt.lost, tt.dups, tt.wrong, tt.dlDist)
			}
			if r.deadCounts[3] != int64(len(tt.dead)) || l.poisonCount() != 2 || l.complete() != (tt.lost == 0) {
				t.Fatalf("counts %v, %d poison, complete %v", r.deadCounts, l.poisonCount(), l.complete())
			}
		})
	}
}
