package tasks

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newLimiter(60, 2) // a token a second, 2 at once
	l.now = func() time.Time { return now }
	take := func(key string, wantOK bool, wantWait time.Duration) {
		t.Helper()
		ok, wait := l.take(key)
		if ok != wantOK || wait != wantWait {
			t.Fatalf("take(%q) at +%v = %v %v, want %v %v", key, now.Sub(time.Unix(1_000_000, 0)), ok, wait, wantOK, wantWait)
		}
	}
	take("a", true, 0)
	take("a", true, 0)
	take("a", false, time.Second)
	take("b", true, 0) // keys are apart
	now = now.Add(500 * time.Millisecond)
	take("a", false, 500*time.Millisecond)
	now = now.Add(500 * time.Millisecond)
	take("a", true, 0)
	// Full buckets are forgotten, so the keys held stay those seen lately.
	now = now.Add(time.Hour)
	take("c", true, 0)
	if len(l.buckets) != 1 {
		t.Fatalf("%d buckets after an hour, want only the new one", len(l.buckets))
	}
	var none *limiter = newLimiter(-1, 2)
	for range 100 {
		if ok, _ := none.take("a"); !ok {
			t.Fatal("a limiter with a negative rate refused")
		}
	}
}

func TestClientAddr(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:5555":             "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ff::1]:80":    "2001:db8:1:2::/64", // the same /64: one client
		"[::ffff:192.0.2.7]:5555":    "192.0.2.7",
		"not an address":             "not an address",
	} {
		r := httptest.NewRequest("POST", "/v1/auth/login", nil)
		r.RemoteAddr = remote
		if got := clientAddr(r, nil); got != want {
			t.Errorf("clientAddr(%q) = %q, want %q", remote, got, want)
		}
	}
}
