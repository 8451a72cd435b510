package tasks

import (
	"net/http/httptest"
	"testing"
)

// TestClientAddrTrustedProxies: X-Forwarded-For is believed only from a
// trusted peer, read from the right past the trusted hops; a spoofed
// header from any other peer is ignored.
func TestClientAddrTrustedProxies(t *testing.T) {
	proxies, err := parseTrustedProxies([]string{"10.0.0.0/8", "192.0.2.1", "2001:db8:ffff::/48"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer: its header is ignored", "203.0.113.9:4000", []string{"198.51.100.1"}, "203.0.113.9"},
		{"trusted balancer: the client it saw", "10.1.2.3:4000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"a spoof left of the real client is ignored", "10.1.2.3:4000", []string{"1.2.3.4, 198.51.100.7"}, "198.51.100.7"},
		{"a chain of trusted proxies is walked", "10.1.2.3:4000", []string{"198.51.100.7, 192.0.2.1", "10.9.9.9"}, "198.51.100.7"},
		{"trusted peer without a header", "10.1.2.3:4000", nil, "10.1.2.3"},
		{"every hop trusted: the leftmost", "10.1.2.3:4000", []string{"10.0.0.1"}, "10.0.0.1"},
		{"garbage ends the walk at the last trusted hop", "10.1.2.3:4000", []string{"198.51.100.7, garbage, 10.0.0.2"}, "10.0.0.2"},
		{"a single trusted address", "192.0.2.1:80", []string{"198.51.100.8"}, "198.51.100.8"},
		{"IPv6 client behind a trusted IPv6 proxy: its /64", "[2001:db8:ffff::1]:80", []string{"2001:db8:1:2::99"}, "2001:db8:1:2::/64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/auth/login", nil)
			r.RemoteAddr = c.peer
			for _, h := range c.xff {
				r.Header.Add("X-Forwarded-For", h)
			}
			if got := clientAddr(r, proxies); got != c.want {
				t.Fatalf("clientAddr = %q, want %q", got, c.want)
			}
		})
	}
	if _, err := parseTrustedProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Fatal("a CIDR with /33 was taken")
	}
}
