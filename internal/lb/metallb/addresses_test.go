package metallb

import (
	"fmt"
	"net/netip"
	"testing"

	"go.universe.tf/metallb/api/v1beta1"
)

func TestParseAddresses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"10.0.0.0/24", "[10.0.0.0/24]"},
		{"10.0.0.7/24", "[10.0.0.0/24]"},
		{"10.0.0.200-10.0.0.215", "[10.0.0.200/29 10.0.0.208/29]"},
		{"10.0.0.200 - 10.0.0.250", "[10.0.0.200/29 10.0.0.208/28 10.0.0.224/28 10.0.0.240/29 10.0.0.248/31 10.0.0.250/32]"},
		{"10.0.0.5-10.0.0.5", "[10.0.0.5/32]"},
		{"0.0.0.0-255.255.255.255", "[0.0.0.0/0]"},
		{"fd00::1-fd00::4", "[fd00::1/128 fd00::2/127 fd00::4/128]"},
		{"fd00:10::/64", "[fd00:10::/64]"},
		{"10.0.0.0", `invalid CIDR "10.0.0.0"`},
		{"10.0.0.9-10.0.0.1", `invalid IP range "10.0.0.9-10.0.0.1": start IP "10.0.0.9" is after the end IP "10.0.0.1"`},
		{"10.0.0.1-fd00::1", `invalid IP range "10.0.0.1-fd00::1": start and end IPs must be the same family`},
		{"x-10.0.0.1", `invalid IP range "x-10.0.0.1": invalid start IP "x"`},
		{"10.0.0.1-y", `invalid IP range "10.0.0.1-y": invalid end IP "y"`},
	} {
		got, err := ParseAddresses(tc.in)
		s := fmt.Sprint(got)
		if err != nil {
			s = err.Error()
		}
		if s != tc.want {
			t.Errorf("ParseAddresses(%q) = %s, want %s", tc.in, s, tc.want)
		}
	}
}

func TestPoolContains(t *testing.T) {
	p := &v1beta1.IPAddressPool{Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.0.200-10.0.0.215", "fd00::/120", "bogus"}}}
	for ip, want := range map[string]bool{"10.0.0.200": true, "10.0.0.215": true, "10.0.0.216": false, "10.0.0.199": false,
		"fd00::ff": true, "fd00::100": false, "::ffff:10.0.0.201": true} {
		if got := PoolContains(p, netip.MustParseAddr(ip)); got != want {
			t.Errorf("%s: %v, want %v", ip, got, want)
		}
	}
}
