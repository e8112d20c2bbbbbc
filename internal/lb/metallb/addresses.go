package metallb

import (
	"fmt"
	"net/netip"
	"strings"

	"go.universe.tf/metallb/api/v1beta1"

	"github.com/svcnet/svcnet/internal/netaddr"
)

// ParseAddresses reads one entry of an IPAddressPool's spec.addresses as
// MetalLB does: a CIDR ("10.0.0.0/24", "fc00::/120"), or an inclusive
// range of one family ("10.0.0.200-10.0.0.215"), which comes back as the
// fewest prefixes that cover it exactly, lowest first. A CIDR's host bits
// are dropped. The errors are MetalLB's.
func ParseAddresses(s string) ([]netip.Prefix, error) {
	if !strings.Contains(s, "-") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("invalid CIDR %q", s)
		}
		return []netip.Prefix{p.Masked()}, nil
	}
	from, to, _ := strings.Cut(s, "-")
	start, err := netip.ParseAddr(strings.TrimSpace(from))
	if err != nil {
		return nil, fmt.Errorf("invalid IP range %q: invalid start IP %q", s, from)
	}
	end, err := netip.ParseAddr(strings.TrimSpace(to))
	if err != nil {
		return nil, fmt.Errorf("invalid IP range %q: invalid end IP %q", s, to)
	}
	start, end = start.Unmap(), end.Unmap()
	if start.Is4() != end.Is4() {
		return nil, fmt.Errorf("invalid IP range %q: start and end IPs must be the same family", s)
	}
	if start.Compare(end) > 0 {
		return nil, fmt.Errorf("invalid IP range %q: start IP %q is after the end IP %q", s, start, end)
	}
	return Summarize(start, end), nil
}

// Summarize is the fewest prefixes that cover start..end (inclusive, one
// family, start not after end) exactly, lowest first.
func Summarize(start, end netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for {
		// The largest prefix that starts at start and ends within end.
		bits := start.BitLen()
		for bits > 0 {
			p := netip.PrefixFrom(start, bits-1)
			if p.Masked().Addr() != start || netaddr.LastAddr(p).Compare(end) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(start, bits)
		out = append(out, p)
		last := netaddr.LastAddr(p)
		if last.Compare(end) >= 0 {
			return out
		}
		start = last.Next()
	}
}

// PoolContains says whether ip is one of the pool's addresses; entries
// that do not parse hold none.
func PoolContains(p *v1beta1.IPAddressPool, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, s := range p.Spec.Addresses {
		prefixes, _ := ParseAddresses(s)
		for _, c := range prefixes {
			if c.Contains(ip) {
				return true
			}
		}
	}
	return false
}
