package addons

import (
	"net/netip"
	"testing"
)

func TestNodesPool(t *testing.T) {
	for _, tc := range []struct {
		network string
		nodes   int
		want    string
	}{
		{"10.250.0.0/24", 3, "10.250.0.200-10.250.0.250"},
		{"10.250.0.0/16", 3, "10.250.0.200-10.250.0.250"},
		{"192.168.7.0/26", 3, "192.168.7.32-192.168.7.62"},
		{"10.250.0.0/24", 199, ""},
		{"10.0.0.0/30", 1, ""},
	} {
		if got := NodesPool(netip.MustParsePrefix(tc.network), tc.nodes); got != tc.want {
			t.Errorf("NodesPool(%s, %d) = %q, want %q", tc.network, tc.nodes, got, tc.want)
		}
	}
	if err := ParsePools([]string{"10.0.0.200-10.0.0.215", "fd00::/120"}); err != nil {
		t.Errorf("ParsePools: %v", err)
	}
	if err := ParsePools([]string{"10.0.0.300"}); err == nil || err.Error() != `--lb-pool: invalid CIDR "10.0.0.300"` {
		t.Errorf("ParsePools of a bad address: %v", err)
	}
}
