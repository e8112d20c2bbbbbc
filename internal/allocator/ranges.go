package allocator

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/svcnet/svcnet/internal/storage"
)

// Upstream's allocator errors; clients match on their text.
var (
	ErrFull              = errors.New("range is full")
	ErrIPAllocated       = errors.New("provided IP is already allocated")
	ErrPortAllocated     = errors.New("provided port is already allocated")
	ErrMismatchedNetwork = errors.New("the provided network does not match the current range")
)

// IPNotInRangeError: the IP is in the range's CIDR but is its network or
// (IPv4) broadcast address, which are never handed out.
type IPNotInRangeError struct {
	IP    netip.Addr
	Range string
}

func (e *IPNotInRangeError) Error() string {
	return fmt.Sprintf("the provided IP (%s) is not in the valid range. The range of valid IPs is %s", e.IP, e.Range)
}

// PortNotInRangeError: the port is outside the node port range.
type PortNotInRangeError struct{ Range string }

func (e *PortNotInRangeError) Error() string {
	return fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", e.Range)
}

// maxIPv6Items caps the bitmap of an IPv6 range, as upstream does.
const maxIPv6Items = 65536

// IPRange numbers the usable addresses of a service CIDR: value 0 is the
// network address + 1; the network address, and the broadcast address of an
// IPv4 CIDR, are never usable.
type IPRange struct {
	prefix netip.Prefix
	first  netip.Addr
	size   int
	offset int
}

// ParseIPRange parses a CIDR such as 10.96.0.0/12.
func ParseIPRange(cidr string) (*IPRange, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil {
		return nil, fmt.Errorf("invalid CIDR %q: %w", cidr, err)
	}
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	total := 1 << min(hostBits, 62)
	size := total - 1 // the network address
	if p.Addr().Is4() {
		size-- // the broadcast address
	} else if total > maxIPv6Items {
		size = maxIPv6Items - 1
	}
	return &IPRange{prefix: p, first: p.Addr().Next(), size: max(size, 0), offset: staticBand(total, 16, 256, 16)}, nil
}

// staticBand is upstream's size of the lower band reserved for values users
// choose: min(max(lo, size/step), hi), or 0 for ranges of lo values or fewer.
func staticBand(size, lo, hi, step int) int {
	if size <= lo {
		return 0
	}
	return min(max(lo, size/step), hi)
}

// String is the CIDR, as stored in the RangeAllocation.
func (r *IPRange) String() string { return r.prefix.String() }

// Prefix is the range's CIDR.
func (r *IPRange) Prefix() netip.Prefix { return r.prefix }

// Family is IPv4 or IPv6.
func (r *IPRange) Family() corev1.IPFamily { return FamilyOf(r.prefix.Addr()) }

// Size is the number of usable addresses.
func (r *IPRange) Size() int { return r.size }

// First is the first usable address (the network address + 1), the
// address of the `kubernetes` Service.
func (r *IPRange) First() netip.Addr { return r.first }

// Index returns the bitmap value of ip: ErrMismatchedNetwork outside the
// CIDR, IPNotInRangeError for its reserved addresses.
func (r *IPRange) Index(ip netip.Addr) (int, error) {
	ip = ip.Unmap()
	if !r.prefix.Contains(ip) {
		return 0, ErrMismatchedNetwork
	}
	i, ok := distance(r.first, ip)
	if !ok || i >= uint64(r.size) {
		return 0, &IPNotInRangeError{IP: ip, Range: r.String()}
	}
	return int(i), nil
}

// Addr is the address of bitmap value i.
func (r *IPRange) Addr(i int) netip.Addr {
	b := r.first.As16()
	carry := uint64(i)
	for k := 15; k >= 0 && carry > 0; k-- {
		sum := uint64(b[k]) + carry&0xff
		b[k] = byte(sum)
		carry = carry>>8 + sum>>8
	}
	a := netip.AddrFrom16(b)
	if r.first.Is4() {
		return a.Unmap()
	}
	return a
}

// NewBitmap returns an empty bitmap for the range.
func (r *IPRange) NewBitmap() *Bitmap { return NewBitmap(r.size, min(r.offset, r.size)) }

// distance is to-from when from <= to and they differ only in their last
// eight bytes (service ranges are at most 2^20 addresses).
func distance(from, to netip.Addr) (uint64, bool) {
	a, b := from.As16(), to.As16()
	if [8]byte(a[:8]) != [8]byte(b[:8]) {
		return 0, false
	}
	var x, y uint64
	for k := 8; k < 16; k++ {
		x, y = x<<8|uint64(a[k]), y<<8|uint64(b[k])
	}
	if y < x {
		return 0, false
	}
	return y - x, true
}

// FamilyOf is the IP family of an address.
func FamilyOf(ip netip.Addr) corev1.IPFamily {
	if ip.Unmap().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// PortRange numbers the node ports: value 0 is the range's base port.
type PortRange struct {
	utilnet.PortRange
	offset int
}

// ParsePortRange parses a range such as 30000-32767.
func ParsePortRange(s string) (*PortRange, error) {
	pr, err := utilnet.ParsePortRange(s)
	if err != nil {
		return nil, fmt.Errorf("invalid port range %q: %w", s, err)
	}
	return &PortRange{PortRange: *pr, offset: staticBand(pr.Size, 16, 128, 32)}, nil
}

// Index returns the bitmap value of port, or PortNotInRangeError.
func (r *PortRange) Index(port int) (int, error) {
	if !r.Contains(port) {
		return 0, &PortNotInRangeError{Range: r.String()}
	}
	return port - r.Base, nil
}

// NewBitmap returns an empty bitmap for the range.
func (r *PortRange) NewBitmap() *Bitmap { return NewBitmap(r.Size, r.offset) }

// Config is the ranges Services are allocated from.
type Config struct {
	// ServiceCIDRs holds one range per IP family, the primary first.
	ServiceCIDRs []*IPRange
	NodePorts    *PortRange
}

// maxServiceHostBits limits a service CIDR to 2^20 addresses, as upstream.
const maxServiceHostBits = 20

// ParseConfig parses --service-cluster-ip-range (one CIDR, or two of
// different families) and --service-node-port-range, with upstream's
// messages for bad values.
func ParseConfig(cidrs, nodePorts string) (*Config, error) {
	list := strings.Split(cidrs, ",")
	if len(list) > 2 {
		return nil, errors.New("--service-cluster-ip-range must not contain more than two entries")
	}
	c := &Config{}
	for _, s := range list {
		r, err := ParseIPRange(s)
		if err != nil {
			return nil, fmt.Errorf("--service-cluster-ip-range: %w", err)
		}
		bits := r.prefix.Addr().BitLen()
		if bits-r.prefix.Bits() > maxServiceHostBits {
			return nil, fmt.Errorf("specified --service-cluster-ip-range is too large; for %d-bit addresses, the mask must be >= %d",
				bits, bits-maxServiceHostBits)
		}
		c.ServiceCIDRs = append(c.ServiceCIDRs, r)
	}
	if len(c.ServiceCIDRs) == 2 && c.ServiceCIDRs[0].Family() == c.ServiceCIDRs[1].Family() {
		return nil, errors.New("--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family")
	}
	pr, err := ParsePortRange(nodePorts)
	if err != nil {
		return nil, fmt.Errorf("--service-node-port-range: %w", err)
	}
	c.NodePorts = pr
	return c, nil
}

// Range is the service CIDR of a family, or nil when the family is not
// configured.
func (c *Config) Range(family corev1.IPFamily) *IPRange {
	for _, r := range c.ServiceCIDRs {
		if r.Family() == family {
			return r
		}
	}
	return nil
}

// Primary is the family of the first service CIDR.
func (c *Config) Primary() corev1.IPFamily { return c.ServiceCIDRs[0].Family() }

// DualStack reports whether both families are configured.
func (c *Config) DualStack() bool { return len(c.ServiceCIDRs) == 2 }

// Services is what Service writes allocate from: the cluster IPs and the
// node ports of one Config.
type Services struct {
	IPs   *Addresses
	Ports *Store
}

// NewServices returns the allocators of cfg over etcd; codec stores the
// IPAddress objects.
func NewServices(client *clientv3.Client, cfg *Config, codec storage.Codec) Services {
	return Services{IPs: NewAddresses(client, cfg, codec), Ports: NewStore(client, cfg)}
}

// Config is the allocators' ranges.
func (s Services) Config() *Config { return s.Ports.Config() }
