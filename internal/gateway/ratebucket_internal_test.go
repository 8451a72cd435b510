package gateway

import (
	"testing"
	"time"
)

// TestRateBucket: a batch larger than the burst passes and is owed, paid
// at the rate; an idle bucket fills up to one second's worth only; a new
// rate applies to the debt at once; no rate owes nothing.
func TestRateBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var b rateBucket
	b.setRate(100, t0) // burst 100, starts full
	if d := b.owed(t0); d != 0 {
		t.Fatalf("a full bucket owes %v", d)
	}
	b.take(350, t0) // 3.5 bursts at once: let through, 250 owed
	if d := b.owed(t0); d < 2500*time.Millisecond || d > 2500*time.Millisecond+time.Microsecond {
		t.Fatalf("250 owed at 100/s: owed %v, want 2.5s", d)
	}
	if d := b.owed(t0.Add(time.Second)); d < 1500*time.Millisecond || d > 1500*time.Millisecond+time.Microsecond {
		t.Fatalf("a second later: owed %v, want 1.5s", d)
	}
	b.setRate(1000, t0.Add(time.Second)) // 150 owed, now paid at 1000/s
	if d := b.owed(t0.Add(time.Second)); d < 150*time.Millisecond || d > 150*time.Millisecond+time.Microsecond {
		t.Fatalf("after the rate rose to 1000/s: owed %v, want 150ms", d)
	}
	b.take(0, t0.Add(time.Hour)) // idle for an hour: full, not an hour's worth
	b.take(1001, t0.Add(time.Hour))
	if d := b.owed(t0.Add(time.Hour)); d <= 0 {
		t.Fatalf("an idle bucket filled past its burst: %v owed after taking burst+1", d)
	}
	b.setRate(0, t0.Add(time.Hour))
	b.take(1e9, t0.Add(time.Hour))
	if d := b.owed(t0.Add(time.Hour)); d != 0 {
		t.Fatalf("no rate: owed %v", d)
	}
	b.setRate(10, t0.Add(time.Hour)) // from no limit: starts full
	if d := b.owed(t0.Add(time.Hour)); d != 0 {
		t.Fatalf("a bucket given a rate after none owes %v", d)
	}
}
