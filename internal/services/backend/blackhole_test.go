package backend

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestBlackHoleConnectHangs: a connect to the black hole neither
// completes nor is refused until the caller's timeout, and once the black
// hole is closed the same address refuses at once.
func TestConnectHoleHangs(t *testing.T) {
	b, err := ListenConnectHole()
	if errors.Is(err, ErrNoConnectHole) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	const wait = 300 * time.Millisecond
	start := time.Now()
	c, err := net.DialTimeout("tcp", b.Addr(), wait)
	if err == nil {
		c.Close()
		t.Fatal("the connect completed")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) < wait {
		t.Fatalf("connect ended after %v with %v, want a timeout after %v", time.Since(start), err, wait)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	c, err = net.DialTimeout("tcp", b.Addr(), 2*time.Second)
	if err == nil {
		c.Close()
		t.Fatal("the closed black hole still accepts connects")
	}
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the closed black hole still swallows connects: %v", err)
	}
}
