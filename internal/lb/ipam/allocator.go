package ipam

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/netaddr"
)

// port is one port a Service uses on its address.
type port struct {
	proto string
	port  int32
}

func (p port) String() string { return fmt.Sprintf("%s/%d", p.proto, p.port) }

// sharing is what decides whether two Services may share an address:
// the same allow-shared-ip key, and, for externalTrafficPolicy Local, the
// same selector (the backend), since the address is announced from the
// nodes of its endpoints.
type sharing struct {
	key, backend string
}

// use is what a Service wants of its addresses.
type use struct {
	ports []port
	sharing
}

// useOf is svc's use: its ports, sharing key and backend.
func useOf(svc *corev1.Service) use {
	u := use{sharing: sharing{key: sharingKey(svc)}}
	for _, p := range svc.Spec.Ports {
		u.ports = append(u.ports, port{proto: string(p.Protocol), port: p.Port})
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		u.backend = labels.Set(svc.Spec.Selector).String()
	}
	return u
}

// allocation is one Service's addresses.
type allocation struct {
	pool string
	ips  []netip.Addr
	use
}

// address is who uses one address.
type address struct {
	// sharing is that of the Service that took the address last (all of
	// its users share one).
	sharing  sharing
	services map[string]bool
	ports    map[port]string
}

// allocator is the state of MetalLB's controller: which Service holds
// which addresses of which pool. It is not safe for concurrent use (one
// worker owns it).
type allocator struct {
	pools     *pools
	allocated map[string]*allocation
	addresses map[netip.Addr]*address
}

func newAllocator() *allocator {
	return &allocator{pools: &pools{byName: map[string]*pool{}}, allocated: map[string]*allocation{}, addresses: map[netip.Addr]*address{}}
}

// setPools replaces the configuration: an allocation whose addresses no
// pool owns any more is dropped (its Service is re-converged after), one
// whose addresses moved to another pool follows them.
func (a *allocator) setPools(ps *pools) {
	a.pools = ps
	for svc, al := range a.allocated {
		p := ps.poolFor(al.ips)
		if p == nil {
			a.unassign(svc)
			continue
		}
		al.pool = p.name
	}
}

// record gives svc the allocation al, replacing what svc had; the caller
// has checked that it may.
func (a *allocator) record(svc string, al *allocation) {
	a.unassign(svc)
	a.allocated[svc] = al
	for _, ip := range al.ips {
		ad := a.addresses[ip]
		if ad == nil {
			ad = &address{services: map[string]bool{}, ports: map[port]string{}}
			a.addresses[ip] = ad
		}
		ad.sharing = al.sharing
		ad.services[svc] = true
		for _, p := range al.ports {
			ad.ports[p] = svc
		}
	}
}

// unassign frees svc's addresses, if it has any.
func (a *allocator) unassign(svc string) {
	al := a.allocated[svc]
	if al == nil {
		return
	}
	delete(a.allocated, svc)
	for _, ip := range al.ips {
		ad := a.addresses[ip]
		delete(ad.services, svc)
		for _, p := range al.ports {
			if ad.ports[p] == svc {
				delete(ad.ports, p)
			}
		}
		if len(ad.services) == 0 {
			delete(a.addresses, ip)
		}
	}
}

// pool is the pool svc's addresses are from, "" when it has none.
func (a *allocator) pool(svc string) string {
	if al := a.allocated[svc]; al != nil {
		return al.pool
	}
	return ""
}

// ips are svc's addresses.
func (a *allocator) ips(svc string) []netip.Addr {
	if al := a.allocated[svc]; al != nil {
		return al.ips
	}
	return nil
}

// sharingOf is the sharing of svc's allocation, to notice a change that
// other Services' allocations may depend on.
func (a *allocator) sharingOf(svc string) sharing {
	if al := a.allocated[svc]; al != nil {
		return al.sharing
	}
	return sharing{}
}

// check says whether svc may use ip as u says, given its other users:
// they must allow sharing with the same key and backend, and use none of
// u's ports. MetalLB's messages.
func (a *allocator) check(svc string, ip netip.Addr, u use) error {
	ad := a.addresses[ip]
	if ad == nil {
		return nil
	}
	if err := sharingOK(ad.sharing, u.sharing); err != nil {
		var others []string
		for s := range ad.services {
			if s != svc {
				others = append(others, s)
			}
		}
		if len(others) > 0 {
			slices.Sort(others)
			return fmt.Errorf("can't change sharing key for %q, address also in use by %s", svc, strings.Join(others, ","))
		}
	}
	for _, p := range u.ports {
		if cur, ok := ad.ports[p]; ok && cur != svc {
			return fmt.Errorf("port %s is already in use on %q", p, ip)
		}
	}
	return nil
}

func sharingOK(existing, next sharing) error {
	switch {
	case existing.key == "":
		return errors.New("existing service does not allow sharing")
	case next.key == "":
		return errors.New("new service does not allow sharing")
	case existing.key != next.key:
		return fmt.Errorf("sharing key %q does not match existing sharing key %q", next.key, existing.key)
	case existing.backend != next.backend:
		return fmt.Errorf("backend key %q does not match existing sharing key %q", next.backend, existing.backend)
	}
	return nil
}

// assign gives svc the addresses ips, if configuration and sharing allow.
func (a *allocator) assign(svcKey string, svc *corev1.Service, ips []netip.Addr, u use) error {
	p := a.pools.poolFor(ips)
	if p == nil {
		return fmt.Errorf("%s is not allowed in config", quoted(ips))
	}
	if !p.compatible(svc) {
		return fmt.Errorf("pool %s not compatible for ip assignment", p.name)
	}
	if len(ips) > 2 {
		return fmt.Errorf("more than two addresses %s", quoted(ips))
	}
	if len(ips) == 2 && ips[0].Is4() == ips[1].Is4() {
		return fmt.Errorf("%q %q has the same family", ips[0], ips[1])
	}
	for _, ip := range ips {
		if err := a.check(svcKey, ip, u); err != nil {
			return err
		}
	}
	a.record(svcKey, &allocation{pool: p.name, ips: slices.Clone(ips), use: use{ports: slices.Clone(u.ports), sharing: u.sharing}})
	return nil
}

// free is the lowest address of each family in p that svc may use.
func (a *allocator) free(p *pool, svc string, u use) (v4, v6 netip.Addr, err error) {
	for _, c := range p.cidrs {
		if (c.Addr().Is4() && v4.IsValid()) || (!c.Addr().Is4() && v6.IsValid()) {
			continue
		}
		last := netaddr.LastAddr(c)
		for ip := c.Addr(); ; ip = ip.Next() {
			if !(p.avoidBuggyIPs && buggy(ip)) && a.check(svc, ip, u) == nil {
				if ip.Is4() {
					v4 = ip
				} else {
					v6 = ip
				}
				break
			}
			if ip == last {
				break
			}
		}
	}
	if !v4.IsValid() && !v6.IsValid() {
		return v4, v6, fmt.Errorf("no available IPs in pool %s", p.name)
	}
	return v4, v6, nil
}

// family is a Service's or a set of addresses' IP family.
type family string

const (
	ipv4      family = "ipv4"
	ipv6      family = "ipv6"
	dualStack family = "dual"
)

// familyOf is the family of addresses, MetalLB's errors.
func familyOf(ips []string) (family, error) {
	var parsed []netip.Addr
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return "", fmt.Errorf("IPFamilyForAddresses: Invalid address %q", ips)
		}
		parsed = append(parsed, ip)
	}
	switch {
	case len(parsed) == 1 && parsed[0].Is4():
		return ipv4, nil
	case len(parsed) == 1:
		return ipv6, nil
	case len(parsed) == 2 && parsed[0].Is4() == parsed[1].Is4():
		return "", fmt.Errorf("IPFamilyForAddresses: same address family %q", ips)
	case len(parsed) == 2:
		return dualStack, nil
	}
	return "", fmt.Errorf("IPFamilyForAddresses: invalid ips length %d %q", len(ips), ips)
}

// serviceFamily is the family of svc's cluster IPs.
func serviceFamily(svc *corev1.Service) (family, error) {
	if len(svc.Spec.ClusterIPs) > 0 {
		return familyOf(svc.Spec.ClusterIPs)
	}
	return familyOf([]string{svc.Spec.ClusterIP})
}

func policyOf(svc *corev1.Service) corev1.IPFamilyPolicy {
	if svc.Spec.IPFamilyPolicy != nil {
		return *svc.Spec.IPFamilyPolicy
	}
	return corev1.IPFamilyPolicySingleStack
}

// pick chooses from a pool's free addresses what a Service of family f
// and policy gets.
func pick(poolName string, v4, v6 netip.Addr, f family, policy corev1.IPFamilyPolicy) ([]netip.Addr, error) {
	switch {
	case f == ipv4 && v4.IsValid():
		return []netip.Addr{v4}, nil
	case f == ipv6 && v6.IsValid():
		return []netip.Addr{v6}, nil
	case f == dualStack && v4.IsValid() && v6.IsValid() && policy != corev1.IPFamilyPolicySingleStack:
		return []netip.Addr{v4, v6}, nil
	case f == dualStack && policy == corev1.IPFamilyPolicyPreferDualStack && v4.IsValid():
		return []netip.Addr{v4}, nil
	case f == dualStack && policy == corev1.IPFamilyPolicyPreferDualStack && v6.IsValid():
		return []netip.Addr{v6}, nil
	}
	return nil, fmt.Errorf("no available IPs in pool %s for %s IPFamily", poolName, f)
}

// bestPool is the first of ps with free addresses for svc's family: one
// that has the family (both, for a dual-stack Service), else, for
// PreferDualStack, the first with the primary family, else the first with
// the other.
func (a *allocator) bestPool(ps []*pool, svcKey string, svc *corev1.Service, f family, u use) (*pool, netip.Addr, netip.Addr, error) {
	type candidate struct {
		p      *pool
		v4, v6 netip.Addr
	}
	var primary, secondary *candidate
	v6First := len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	for _, p := range ps {
		v4, v6, err := a.free(p, svcKey, u)
		if err != nil {
			continue
		}
		if (f == ipv4 && v4.IsValid()) || (f == ipv6 && v6.IsValid()) || (v4.IsValid() && v6.IsValid()) {
			return p, v4, v6, nil
		}
		if f != dualStack || policyOf(svc) != corev1.IPFamilyPolicyPreferDualStack {
			continue
		}
		first, second := v4, v6
		if v6First {
			first, second = v6, v4
		}
		if first.IsValid() && primary == nil {
			primary = &candidate{p, v4, v6}
		}
		if second.IsValid() && secondary == nil {
			secondary = &candidate{p, v4, v6}
		}
	}
	for _, c := range []*candidate{primary, secondary} {
		if c != nil {
			return c.p, c.v4, c.v6, nil
		}
	}
	return nil, netip.Addr{}, netip.Addr{}, fmt.Errorf("no suitable pool for %s IPFamily", f)
}

// errNoAvailableIPs is MetalLB's answer when no pool has room.
var errNoAvailableIPs = errors.New("no available IPs")

// allocate gives svc addresses from the best pool: first the pools that
// name its namespace or select it (by priority), then every other pool
// that assigns automatically, lowest free address first.
func (a *allocator) allocate(svcKey string, svc *corev1.Service, f family, u use) ([]netip.Addr, error) {
	if al := a.allocated[svcKey]; al != nil {
		if err := a.assign(svcKey, svc, al.ips, u); err != nil {
			return nil, err
		}
		return al.ips, nil
	}
	if ips, err := a.allocateFrom(a.pinnedPools(svc), svcKey, svc, f, u); err == nil {
		return ips, nil
	}
	var rest []*pool
	for _, n := range a.pools.names {
		if p := a.pools.byName[n]; p.autoAssign && p.allocateTo == nil {
			rest = append(rest, p)
		}
	}
	if ips, err := a.allocateFrom(rest, svcKey, svc, f, u); err == nil {
		return ips, nil
	}
	return nil, errNoAvailableIPs
}

func (a *allocator) allocateFrom(ps []*pool, svcKey string, svc *corev1.Service, f family, u use) ([]netip.Addr, error) {
	p, v4, v6, err := a.bestPool(ps, svcKey, svc, f, u)
	if err != nil {
		return nil, err
	}
	ips, err := pick(p.name, v4, v6, f, policyOf(svc))
	if err != nil {
		return nil, errNoAvailableIPs
	}
	if err := a.assign(svcKey, svc, ips, u); err != nil {
		return nil, errNoAvailableIPs
	}
	return ips, nil
}

// pinnedPools are the automatic pools that name svc's namespace or select
// it by its labels, by priority (1 first; pools without one last, in name
// order).
func (a *allocator) pinnedPools(svc *corev1.Service) []*pool {
	var out []*pool
	for _, n := range a.pools.names {
		p := a.pools.byName[n]
		if p.allocateTo == nil || !p.autoAssign || !p.compatible(svc) {
			continue
		}
		// A pool is pinned by its namespaces, or by service selectors.
		if p.allocateTo.namespaces.Len() > 0 || len(p.allocateTo.services) > 0 {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(x, y *pool) int {
		px, py := x.allocateTo.priority, y.allocateTo.priority
		switch {
		case px > 0 && py > 0:
			return cmp.Compare(px, py)
		case px > 0:
			return -1
		case py > 0:
			return 1
		}
		return 0
	})
	return out
}

// allocateFromPool gives svc addresses from the pool it asks for.
func (a *allocator) allocateFromPool(svcKey string, svc *corev1.Service, f family, poolName string, u use) ([]netip.Addr, error) {
	if al := a.allocated[svcKey]; al != nil {
		if err := a.assign(svcKey, svc, al.ips, u); err != nil {
			return nil, err
		}
		return al.ips, nil
	}
	p := a.pools.byName[poolName]
	if p == nil {
		return nil, fmt.Errorf("unknown pool %q", poolName)
	}
	v4, v6, err := a.free(p, svcKey, u)
	if err != nil {
		return nil, err
	}
	ips, err := pick(p.name, v4, v6, f, policyOf(svc))
	if err != nil {
		return nil, err
	}
	if err := a.assign(svcKey, svc, ips, u); err != nil {
		return nil, err
	}
	return ips, nil
}

// allocateOtherFamily adds to svc's one address (PreferDualStack) one of
// the other family from the same pool.
func (a *allocator) allocateOtherFamily(svcKey string, svc *corev1.Service, have netip.Addr, poolName string, u use) (netip.Addr, error) {
	p := a.pools.byName[poolName]
	if p == nil {
		return netip.Addr{}, fmt.Errorf("unknown pool %q", poolName)
	}
	v4, v6, err := a.free(p, svcKey, u)
	if err != nil {
		return netip.Addr{}, err
	}
	want := ipv6
	if !have.Is4() {
		want = ipv4
	}
	ips, err := pick(p.name, v4, v6, want, corev1.IPFamilyPolicySingleStack)
	if err != nil {
		return netip.Addr{}, err
	}
	if err := a.assign(svcKey, svc, []netip.Addr{have, ips[0]}, u); err != nil {
		return netip.Addr{}, err
	}
	return ips[0], nil
}

// counters are a pool's status: its addresses in use and still free, per
// family.
func (a *allocator) counters(name string) (assigned4, assigned6, available4, available6 int64) {
	p := a.pools.byName[name]
	if p == nil {
		return 0, 0, 0, 0
	}
	for ip := range a.addresses {
		if !p.owns(ip) {
			continue
		}
		if ip.Is4() {
			assigned4++
		} else {
			assigned6++
		}
	}
	c4, c6 := p.capacity()
	return assigned4, assigned6, c4 - assigned4, c6 - assigned6
}

// quoted formats addresses as MetalLB's %q of a []net.IP.
func quoted(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return fmt.Sprintf("%q", s)
}
