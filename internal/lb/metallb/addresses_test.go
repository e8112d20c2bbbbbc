package metallb

import (
	"net/netip"
	"testing"

	"go.universe.tf/metallb/api/v1beta1"
)

func TestParseAddresses(t *testing.T) {
	for _, tc := range []struct {
		in, first, last, err string
	}{
		{in: "10.0.0.200-10.0.0.215", first: "10.0.0.200", last: "10.0.0.215"},
		{in: "10.0.0.200 - 10.0.0.215", first: "10.0.0.200", last: "10.0.0.215"},
		{in: "192.168.10.0/24", first: "192.168.10.0", last: "192.168.10.255"},
		{in: "192.168.10.7/32", first: "192.168.10.7", last: "192.168.10.7"},
		{in: "fc00:f853:ccd:e799::/124", first: "fc00:f853:ccd:e799::", last: "fc00:f853:ccd:e799::f"},
		{in: "10.0.0.5-10.0.0.1", err: `invalid IP range "10.0.0.5-10.0.0.1": start IP "10.0.0.5" is after the end IP "10.0.0.1"`},
		{in: "10.0.0.1-fd00::1", err: `invalid IP range "10.0.0.1-fd00::1": start and end IPs must be the same family`},
		{in: "10.0.0.0/33", err: `invalid CIDR "10.0.0.0/33"`},
	} {
		r, err := ParseAddresses(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: error %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r.First.String() != tc.first || r.Last.String() != tc.last {
			t.Errorf("%q: %v-%v, %v; want %s-%s", tc.in, r.First, r.Last, err, tc.first, tc.last)
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
