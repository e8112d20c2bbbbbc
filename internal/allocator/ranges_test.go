package allocator

import (
	"errors"
	"net/netip"
	"testing"
)

func TestIPRangeSizes(t *testing.T) {
	for _, tt := range []struct {
		cidr         string
		size, offset int
		first        string
	}{
		{"10.96.0.0/12", 1<<20 - 2, 256, "10.96.0.1"},
		{"10.0.0.0/24", 254, 16, "10.0.0.1"},
		{"192.168.1.0/28", 14, 0, "192.168.1.1"},
		{"10.1.2.3/30", 2, 0, "10.1.2.1"},
		{"fd00:10:96::/112", 65535, 256, "fd00:10:96::1"},
		{"fd00::/64", 65535, 256, "fd00::1"},
		{"fd00::/120", 255, 16, "fd00::1"},
	} {
		r, err := ParseIPRange(tt.cidr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Size() != tt.size || r.NewBitmap().offset != tt.offset || r.First().String() != tt.first {
			t.Errorf("%s: size %d offset %d first %s, want %d %d %s", tt.cidr, r.Size(), r.NewBitmap().offset, r.First(), tt.size, tt.offset, tt.first)
		}
	}
}

func TestIPRangeIndex(t *testing.T) {
	r, _ := ParseIPRange("10.96.0.0/12")
	for _, s := range []string{"10.96.0.1", "10.96.1.0", "10.111.255.254"} {
		a := netip.MustParseAddr(s)
		i, err := r.Index(a)
		if err != nil || r.Addr(i) != a {
			t.Errorf("%s: index %d (%v) maps back to %s", s, i, err, r.Addr(i))
		}
	}
	for _, tt := range []struct{ ip, err string }{
		{"10.96.0.0", "the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12"},
		{"10.111.255.255", "the provided IP (10.111.255.255) is not in the valid range. The range of valid IPs is 10.96.0.0/12"},
		{"10.0.0.5", "the provided network does not match the current range"},
	} {
		if _, err := r.Index(netip.MustParseAddr(tt.ip)); err == nil || err.Error() != tt.err {
			t.Errorf("%s: got %v, want %q", tt.ip, err, tt.err)
		}
	}
	v6, _ := ParseIPRange("fd00::/120")
	if _, err := v6.Index(netip.MustParseAddr("fd00::ff")); err != nil {
		t.Errorf("the last IPv6 address is usable: %v", err)
	}
}

func TestPortRange(t *testing.T) {
	r, err := ParsePortRange("30000-32767")
	if err != nil {
		t.Fatal(err)
	}
	if r.NewBitmap().offset != 86 || r.NewBitmap().Size() != 2768 {
		t.Errorf("offset %d size %d, want 86 2768", r.NewBitmap().offset, r.NewBitmap().Size())
	}
	_, err = r.Index(40000)
	if want := "provided port is not in the valid range. The range of valid ports is 30000-32767"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if i, err := r.Index(30000); err != nil || i != 0 {
		t.Errorf("30000 -> %d, %v", i, err)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig("10.96.0.0/12, fd00:10:96::/112", "30000-32767")
	if err != nil || !c.DualStack() || c.Primary() != "IPv4" || c.Range("IPv6") == nil {
		t.Fatalf("dual-stack config: %+v, %v", c, err)
	}
	for _, tt := range []struct{ cidrs, ports, err string }{
		{"10.0.0.0/8", "30000-32767", "specified --service-cluster-ip-range is too large; for 32-bit addresses, the mask must be >= 12"},
		{"fd00::/64", "30000-32767", "specified --service-cluster-ip-range is too large; for 128-bit addresses, the mask must be >= 108"},
		{"10.96.0.0/12,10.0.0.0/24", "30000-32767", "--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family"},
		{"10.96.0.0/12,fd00::/112,10.0.0.0/24", "30000-32767", "--service-cluster-ip-range must not contain more than two entries"},
	} {
		if _, err := ParseConfig(tt.cidrs, tt.ports); err == nil || err.Error() != tt.err {
			t.Errorf("%s: got %v, want %q", tt.cidrs, err, tt.err)
		}
	}
	if _, err := ParseConfig("10.96.0.0/12", "30000-x"); err == nil {
		t.Error("a bad port range was accepted")
	}
	var notInRange *IPNotInRangeError
	if errors.As(ErrMismatchedNetwork, &notInRange) {
		t.Error("ErrMismatchedNetwork is not an IPNotInRangeError")
	}
}
