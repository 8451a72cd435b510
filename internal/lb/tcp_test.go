package lb

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/testkit"
)

// echoName serves connections that answer each line with name.
func echoName(t *testing.T, name string) string {
	t.Helper()
	ln := testkit.Listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					c.Write([]byte(name + "\n"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestTCPBalancesConnections: each connection stays on the upstream it
// was joined to, whatever it sends; new connections go round robin; an
// upstream that refuses is skipped (and its failure counted).
func TestTCPBalancesConnections(t *testing.T) {
	refused := testkit.FreeAddr(t)
	ups := []string{echoName(t, "a"), refused, echoName(t, "b")}
	reg := prometheus.NewRegistry()
	tcp, err := NewTCP(Config{Upstreams: ups, FailTimeout: time.Minute}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ln := testkit.Listen(t)
	go tcp.Serve(ln)
	t.Cleanup(func() { ln.Close(); tcp.Close() })

	var got []string
	for range 4 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		first := ""
		for i := range 3 { // three requests on one connection: one upstream
			c.Write([]byte("hi\n"))
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			line = strings.TrimSpace(line)
			if i == 0 {
				first = line
			} else if line != first {
				t.Fatalf("a connection answered by %s, then by %s", first, line)
			}
		}
		got = append(got, first)
	}
	if strings.Join(got, "") != "abab" {
		t.Fatalf("connections went to %v, want a, b, a, b (the refusing upstream skipped)", got)
	}
	if n := testkit.MetricSum(t, reg, "lb_upstream_failures_total", map[string]string{"upstream": refused}); n != 1 {
		t.Fatalf("%v failures of the refusing upstream counted, want 1 (then marked down)", n)
	}
	if p := tcp.Placement(); p[ups[0]] != 2 || p[ups[2]] != 2 {
		t.Fatalf("placement %v, want 2 connections on each live upstream", p)
	}
}
