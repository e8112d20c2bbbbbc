package netaddr

import (
	"bytes"
	"net/netip"
	"testing"
)

func TestLastAddrAndMask(t *testing.T) {
	for _, c := range []struct {
		prefix, last string
		mask         []byte
	}{
		{"10.0.0.0/24", "10.0.0.255", []byte{255, 255, 255, 0}},
		{"10.0.0.200/29", "10.0.0.207", []byte{255, 255, 255, 248}},
		{"10.1.2.3/32", "10.1.2.3", []byte{255, 255, 255, 255}},
		{"0.0.0.0/0", "255.255.255.255", []byte{0, 0, 0, 0}},
		{"fd00::/120", "fd00::ff", append(bytes.Repeat([]byte{255}, 15), 0)},
	} {
		p := netip.MustParsePrefix(c.prefix)
		if got := LastAddr(p); got != netip.MustParseAddr(c.last) {
			t.Errorf("LastAddr(%s) = %s, want %s", p, got, c.last)
		}
		if got := Mask(p); !bytes.Equal(got, c.mask) {
			t.Errorf("Mask(%s) = %v, want %v", p, got, c.mask)
		}
	}
}
