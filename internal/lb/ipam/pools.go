package ipam

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"

	"go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/internal/lb/metallb"
	"github.com/svcnet/svcnet/internal/netaddr"
)

// pool is one IPAddressPool as the allocator uses it.
type pool struct {
	name string
	// cidrs are the pool's addresses in the order of spec.addresses,
	// ranges summarized into prefixes.
	cidrs         []netip.Prefix
	avoidBuggyIPs bool
	autoAssign    bool
	// allocateTo is spec.serviceAllocation, nil without one.
	allocateTo *allocateTo
}

// allocateTo is a pool's serviceAllocation with its namespaceSelectors
// resolved to namespace names.
type allocateTo struct {
	priority   int
	namespaces sets.Set[string]
	// services are the service selectors; a serviceAllocation with
	// neither namespaces nor selectors selects every Service.
	services []labels.Selector
}

// pools is the configuration: every pool, by name.
type pools struct {
	byName map[string]*pool
	// names are the pools' names in order.
	names []string
}

// parsePools reads the IPAddressPools (in name order) with the namespaces
// their namespaceSelectors choose from, as MetalLB's controller parses its
// configuration: one invalid pool, or two pools that overlap, reject the
// whole configuration, with MetalLB's messages.
func parsePools(in []*v1beta1.IPAddressPool, namespaces []*corev1.Namespace) (*pools, error) {
	out := &pools{byName: map[string]*pool{}}
	var all []netip.Prefix
	for _, p := range in {
		pl, err := parsePool(p, namespaces)
		if err != nil {
			return nil, fmt.Errorf("parsing address pool %s: %w", p.Name, err)
		}
		if out.byName[p.Name] != nil {
			return nil, fmt.Errorf("duplicate definition of pool %q", p.Name)
		}
		for _, c := range pl.cidrs {
			for _, m := range all {
				if c.Overlaps(m) {
					return nil, fmt.Errorf("CIDR %q in pool %q overlaps with already defined CIDR %q", c, p.Name, m)
				}
			}
			all = append(all, c)
		}
		out.byName[p.Name] = pl
		out.names = append(out.names, p.Name)
	}
	slices.Sort(out.names)
	return out, nil
}

func parsePool(p *v1beta1.IPAddressPool, namespaces []*corev1.Namespace) (*pool, error) {
	if p.Name == "" {
		return nil, errors.New("missing pool name")
	}
	pl := &pool{name: p.Name, avoidBuggyIPs: p.Spec.AvoidBuggyIPs, autoAssign: p.Spec.AutoAssign == nil || *p.Spec.AutoAssign}
	if len(p.Spec.Addresses) == 0 {
		return nil, errors.New("pool has no prefixes defined")
	}
	for _, a := range p.Spec.Addresses {
		cidrs, err := metallb.ParseAddresses(a)
		if err != nil {
			return nil, fmt.Errorf("invalid CIDR %q in pool %q: %w", a, p.Name, err)
		}
		pl.cidrs = append(pl.cidrs, cidrs...)
	}
	sa := p.Spec.AllocateTo
	if sa == nil {
		return pl, nil
	}
	to := &allocateTo{priority: sa.Priority, namespaces: sets.New[string]()}
	for _, ns := range sa.Namespaces {
		if to.namespaces.Has(ns) {
			return nil, errors.New("duplicate definition in namespaces field")
		}
		to.namespaces.Insert(ns)
	}
	pl.allocateTo = to
	if len(sa.Namespaces) == 0 && len(sa.NamespaceSelectors) == 0 && len(sa.ServiceSelectors) == 0 {
		to.services = []labels.Selector{labels.Everything()}
		return pl, nil
	}
	for i := range sa.NamespaceSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&sa.NamespaceSelectors[i])
		if err != nil {
			return nil, errors.Join(err, fmt.Errorf("invalid namespace label selector %v in ip pool %s", &sa.NamespaceSelectors[i], p.Name))
		}
		for _, ns := range namespaces {
			if sel.Matches(labels.Set(ns.Labels)) {
				to.namespaces.Insert(ns.Name)
			}
		}
	}
	for i := range sa.ServiceSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&sa.ServiceSelectors[i])
		if err != nil {
			return nil, errors.Join(err, fmt.Errorf("invalid service label selector %v in ip pool %s", sa.ServiceSelectors[i], p.Name))
		}
		to.services = append(to.services, sel)
	}
	return pl, nil
}

// String describes the pools for comparing configurations.
func (ps *pools) String() string {
	var b strings.Builder
	for _, n := range ps.names {
		p := ps.byName[n]
		fmt.Fprintf(&b, "%s %v buggy=%t auto=%t", n, p.cidrs, p.avoidBuggyIPs, p.autoAssign)
		if p.allocateTo != nil {
			fmt.Fprintf(&b, " prio=%d ns=%v svc=%v", p.allocateTo.priority, sets.List(p.allocateTo.namespaces), p.allocateTo.services)
		}
		b.WriteString(";")
	}
	return b.String()
}

// compatible says whether svc may have addresses of p: its namespace is
// one of the pool's, and its labels match one of the pool's service
// selectors, where the pool names namespaces or selectors.
func (p *pool) compatible(svc *corev1.Service) bool {
	to := p.allocateTo
	if to == nil {
		return true
	}
	if to.namespaces.Len() > 0 && !to.namespaces.Has(svc.Namespace) {
		return false
	}
	if len(to.services) == 0 {
		return true
	}
	return slices.ContainsFunc(to.services, func(s labels.Selector) bool { return s.Matches(labels.Set(svc.Labels)) })
}

// owns says whether ip is one of the pool's addresses.
func (p *pool) owns(ip netip.Addr) bool {
	if p.avoidBuggyIPs && buggy(ip) {
		return false
	}
	return slices.ContainsFunc(p.cidrs, func(c netip.Prefix) bool { return c.Contains(ip) })
}

// poolFor is the pool that owns every one of ips, nil if none does.
func (ps *pools) poolFor(ips []netip.Addr) *pool {
	for _, n := range ps.names {
		p := ps.byName[n]
		if !slices.ContainsFunc(ips, func(ip netip.Addr) bool { return !p.owns(ip) }) {
			return p
		}
	}
	return nil
}

// buggy says whether ip is an IPv4 address ending in .0 or .255, which
// some consumer routers' smurf protection drops (avoidBuggyIPs).
func buggy(ip netip.Addr) bool {
	if !ip.Is4() {
		return false
	}
	last := ip.As4()[3]
	return last == 0 || last == 255
}

// capacity is how many IPv4 and IPv6 addresses p has, as MetalLB counts
// them for the pool's status: an IPv6 prefix of 2^62 addresses or more
// counts as math.MaxInt64, and avoidBuggyIPs leaves out two addresses of
// every /24 (one at either end of a smaller prefix that touches a /24's
// edge).
func (p *pool) capacity() (v4, v6 int64) {
	for _, c := range p.cidrs {
		host := c.Addr().BitLen() - c.Bits()
		if !c.Addr().Is4() {
			if host >= 62 {
				v6 = math.MaxInt64
			} else {
				v6 = addCapped(v6, int64(1)<<host)
			}
			continue
		}
		n := int64(1) << host
		if p.avoidBuggyIPs {
			if c.Bits() <= 24 {
				n -= int64(2) << (24 - c.Bits())
			} else {
				for _, ip := range []netip.Addr{c.Addr(), netaddr.LastAddr(c)} {
					if buggy(ip) {
						n--
					}
				}
			}
		}
		v4 += n
	}
	return v4, v6
}

func addCapped(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
