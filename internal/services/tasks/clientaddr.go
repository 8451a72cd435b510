package tasks

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The client's address keys the limits per address (ratelimit.go). It is
// the connection's peer, unless the peer is one of Config.TrustedProxies:
// then X-Forwarded-For is read from the right, past every trusted
// address, and the first one that is not trusted is the client. The
// entries left of it were written by whoever sent the request to the
// first trusted proxy, the client itself, and prove nothing; a header
// from a peer that is not trusted is ignored whole, so no client picks
// its own key. Behind a balancer that is not trusted, every client has
// the balancer's address and shares its buckets.

// parseTrustedProxies reads Config.TrustedProxies: CIDRs, or single
// addresses (a /32 or /128).
func parseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("tasks: trusted proxy %q is neither a CIDR (10.0.0.0/8) nor an address (10.0.0.5)", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func trusted(a netip.Addr, proxies []netip.Prefix) bool {
	for _, p := range proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the key of the request's client (see above).
func (s *Service) clientAddr(r *http.Request) string { return clientAddr(r, s.trustedProxies) }

// clientAddr is the key of r's client, believing X-Forwarded-For from
// proxies only: the address, or for IPv6 its /64.
func clientAddr(r *http.Request, proxies []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if len(proxies) > 0 && trusted(ip, proxies) {
		ip = forwardedFor(r.Header.Values("X-Forwarded-For"), ip, proxies)
	}
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return ip.String()
	}
	return p.String()
}

// forwardedFor walks the X-Forwarded-For hops from the right, starting
// at peer (trusted), and returns the first address not trusted; an entry
// that is not an address ends the walk at the last trusted hop.
func forwardedFor(headers []string, peer netip.Addr, proxies []netip.Prefix) netip.Addr {
	hops := strings.Split(strings.Join(headers, ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer
		}
		a = a.Unmap()
		if !trusted(a, proxies) {
			return a
		}
		peer = a
	}
	return peer
}
