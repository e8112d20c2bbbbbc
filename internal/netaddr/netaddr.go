// Package netaddr holds the address arithmetic on net/netip values that
// the pod network, the Service proxy, the Service CIDR controller and the
// load balancer's pools share: a prefix's last address and its mask.
package netaddr

import "net/netip"

// LastAddr is the highest address of p.
func LastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Mask is the network mask of p, as many bytes as its addresses.
func Mask(p netip.Prefix) []byte {
	mask := make([]byte, p.Addr().BitLen()/8)
	for i := range p.Bits() {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return mask
}
