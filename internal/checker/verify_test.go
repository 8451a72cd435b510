package checker

import (
	"testing"
	"time"
)

func TestLedger(t *testing.T) {
	ids := func(stream int, seqs ...int64) []ID {
		out := make([]ID, len(seqs))
		for i, s := range seqs {
			out[i] = ID{Stream: stream, Seq: s}
		}
		return out
	}
	tests := []struct {
		name                    string
		acked, recv             []ID
		lost, dups, unacked, rc int64
		sample                  []ID
	}{
		{"all received", ids(0, 0, 1, 2), ids(0, 2, 1, 0), 0, 0, 0, 3, nil},
		{"one lost", ids(1, 0, 1, 2, 200), ids(1, 0, 2, 1), 1, 0, 0, 3, ids(1, 200)},
		{"duplicates", ids(0, 5), ids(0, 5, 5, 5), 0, 2, 0, 1, nil},
		{"received without an ack", ids(0, 1), ids(0, 1, 2, 700), 0, 0, 2, 3, nil},
		{"nothing received", ids(2, 63, 64, 65), nil, 3, 0, 0, 0, ids(2, 63, 64, 65)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger(3, 1)
			for _, id := range tt.acked {
				l.ack(id.Stream, []ID{id})
			}
			l.receive(0, tt.recv)
			r := l.check(0, 10)
			if r.lost != tt.lost || r.duplicates != tt.dups || r.unackedReceived != tt.unacked || r.received != tt.rc {
				t.Fatalf("lost %d dups %d unacked %d received %d, want %d %d %d %d", r.lost, r.duplicates, r.unackedReceived, r.received, tt.lost, tt.dups, tt.unacked, tt.rc)
			}
			if len(r.sample) != len(tt.sample) {
				t.Fatalf("sample %v, want %v", r.sample, tt.sample)
			}
			for i := range r.sample {
				if r.sample[i] != tt.sample[i] {
					t.Fatalf("sample %v, want %v", r.sample, tt.sample)
				}
			}
			if l.complete() != (tt.lost == 0) {
				t.Fatalf("complete() = %v with %d lost", l.complete(), tt.lost)
			}
		})
	}
}

func TestLedgerIgnoresUnknownStreams(t *testing.T) {
	l := newLedger(1, 1)
	l.receive(0, []ID{{Stream: 7, Seq: 1}, {Stream: -1, Seq: 0}})
	if g := l.groups[0]; g.foreign != 2 || g.received != 0 {
		t.Fatalf("foreign %d received %d", g.foreign, g.received)
	}
}

func TestMeta(t *testing.T) {
	sent := time.Unix(1700000000, 123456789)
	b := encodeMeta(42, ID{Stream: 9, Seq: 1 << 40}, sent)
	run, id, got, ok := decodeMeta(b)
	if !ok || run != 42 || id != (ID{Stream: 9, Seq: 1 << 40}) || !got.Equal(sent) {
		t.Fatalf("decoded %d %v %v %v", run, id, got, ok)
	}
	if _, _, _, ok := decodeMeta(b[:10]); ok {
		t.Fatal("a short header decoded")
	}
}
