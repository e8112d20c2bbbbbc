package metallb

import (
	"fmt"
	"net/netip"
	"strings"

	"go.universe.tf/metallb/api/v1beta1"
)

// Range is an inclusive range of addresses of one family.
type Range struct{ First, Last netip.Addr }

// Contains says whether ip is in the range.
func (r Range) Contains(ip netip.Addr) bool {
	return ip.BitLen() == r.First.BitLen() && r.First.Compare(ip) <= 0 && ip.Compare(r.Last) <= 0
}

// ParseAddresses reads an entry of an IPAddressPool's spec.addresses as
// MetalLB does: a CIDR, or "first-last" (spaces allowed around the
// addresses), both of one family, first not after last.
func ParseAddresses(s string) (Range, error) {
	first, last, isRange := strings.Cut(s, "-")
	if !isRange {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Range{}, fmt.Errorf("invalid CIDR %q", s)
		}
		p = p.Masked()
		r := Range{First: p.Addr(), Last: p.Addr()}
		// The last address: the prefix's host bits all set.
		b := r.Last.AsSlice()
		for i := p.Bits(); i < len(b)*8; i++ {
			b[i/8] |= 0x80 >> (i % 8)
		}
		r.Last, _ = netip.AddrFromSlice(b)
		return r, nil
	}
	a, err := netip.ParseAddr(strings.TrimSpace(first))
	if err != nil {
		return Range{}, fmt.Errorf("invalid IP range %q: invalid start IP %q", s, first)
	}
	b, err := netip.ParseAddr(strings.TrimSpace(last))
	if err != nil {
		return Range{}, fmt.Errorf("invalid IP range %q: invalid end IP %q", s, last)
	}
	if a.BitLen() != b.BitLen() {
		return Range{}, fmt.Errorf("invalid IP range %q: start and end IPs must be the same family", s)
	}
	if a.Compare(b) > 0 {
		return Range{}, fmt.Errorf("invalid IP range %q: start IP %q is after the end IP %q", s, a, b)
	}
	return Range{First: a, Last: b}, nil
}

// PoolContains says whether ip is one of the pool's addresses; entries
// that do not parse hold none.
func PoolContains(p *v1beta1.IPAddressPool, ip netip.Addr) bool {
	for _, s := range p.Spec.Addresses {
		if r, err := ParseAddresses(s); err == nil && r.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}
