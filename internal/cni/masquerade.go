package cni

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/svcnet/svcnet/internal/netaddr"
)

// MasqueradeTable is the pod network's nftables table, one per IP family
// with pods, apart from the proxy's own "svcnet" tables: the proxy's
// cleanup and the pod network's Remove each delete only their own.
//
// It is what the bridge plugin's ipMasq and kindnet's masquerade do: pod
// traffic that leaves the node for an address outside the cluster's pod
// network and the Service ranges goes out from the node's address on the
// outgoing interface (the node IP on the default route), so that replies
// find their way back; pod-to-pod and pod-to-Service traffic keeps the pod's
// address, as the Kubernetes network model wants. A cluster IP is DNATed to
// its endpoint by the proxy in prerouting, so postrouting sees the
// endpoint's address: a pod endpoint keeps the pod's source, an endpoint
// outside the cluster (a hand-written EndpointSlice) is masqueraded.
//
//	table ip svcnet-cni {
//		set no-masquerade { type ipv4_addr; flags interval; elements = { ... } }
//		chain postrouting {
//			type nat hook postrouting priority srcnat; policy accept;
//			ip saddr 10.244.1.0/24 oifname != "svcnet0" ip daddr != @no-masquerade masquerade fully-random
//		}
//	}
//
// The set holds every node's pod CIDR and the Service ranges. Traffic out
// of the pod bridge never leaves the node (it is bridged between the
// node's pods, broadcast and multicast included, and passes postrouting
// only because the proxy turns br_netfilter on), so it is never
// masqueraded.
const MasqueradeTable = "svcnet-cni"

const (
	masqueradeChain = "postrouting"
	noMasqueradeSet = "no-masquerade"
	// srcnat is nft's priority name for source NAT in postrouting.
	srcnat = 100
)

// masqFamily is what differs between the ip and ip6 tables.
type masqFamily struct {
	table    nftables.TableFamily
	keyType  nftables.SetDatatype
	saddrOff uint32
	daddrOff uint32
	addrLen  uint32
}

var (
	masqIPv4 = masqFamily{table: nftables.TableFamilyIPv4, keyType: nftables.TypeIPAddr, saddrOff: 12, daddrOff: 16, addrLen: 4}
	masqIPv6 = masqFamily{table: nftables.TableFamilyIPv6, keyType: nftables.TypeIP6Addr, saddrOff: 8, daddrOff: 24, addrLen: 16}
)

func familyOf(a netip.Addr) masqFamily {
	if a.Is4() {
		return masqIPv4
	}
	return masqIPv6
}

// addrRange is the addresses from first to last, both included.
type addrRange struct{ first, last netip.Addr }

// noMasqueradeRanges turns the prefixes of one family into the sorted,
// disjoint ranges an interval set holds: the kernel refuses overlapping
// intervals, and node pod CIDRs and Service ranges may overlap (two Nodes
// briefly sharing a pod CIDR, a Service range holding a pod CIDR).
// Adjacent ranges are joined.
func noMasqueradeRanges(prefixes []netip.Prefix) []addrRange {
	var rs []addrRange
	for _, p := range prefixes {
		p = p.Masked()
		rs = append(rs, addrRange{p.Addr(), netaddr.LastAddr(p)})
	}
	slices.SortFunc(rs, func(a, b addrRange) int { return a.first.Compare(b.first) })
	var out []addrRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			cur := &out[n-1]
			if next := cur.last.Next(); !next.IsValid() || r.first.Compare(next) <= 0 {
				if r.last.Compare(cur.last) > 0 {
					cur.last = r.last
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// intervalElements are the set elements of ranges: each range opens at its
// first address and closes at the address after its last (none after the
// family's last address).
func intervalElements(rs []addrRange) []nftables.SetElement {
	var els []nftables.SetElement
	for _, r := range rs {
		els = append(els, nftables.SetElement{Key: r.first.AsSlice()})
		if end := r.last.Next(); end.IsValid() {
			els = append(els, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return els
}

// masqueradeSpec is one family's table as SyncMasquerade writes it.
type masqueradeSpec struct {
	family   masqFamily
	podCIDRs []netip.Prefix
	keep     []addrRange
}

func (s masqueradeSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %v", s.family.table, s.podCIDRs)
	for _, r := range s.keep {
		fmt.Fprintf(&b, " %s-%s", r.first, r.last)
	}
	return b.String()
}

// podCIDRs are the node's pod CIDRs (one IPv4 one today).
func (n *Network) podCIDRs() []netip.Prefix {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ipam.cidr == nil {
		return nil
	}
	a, _ := netip.AddrFromSlice(n.ipam.cidr.IP)
	ones, _ := n.ipam.cidr.Mask.Size()
	return []netip.Prefix{netip.PrefixFrom(a.Unmap(), ones)}
}

// masqueradeSpecs plans the table of each family the node has pods in:
// its own pod CIDRs join noMasquerade, whose prefixes of other families are
// left out.
func masqueradeSpecs(podCIDRs, noMasquerade []netip.Prefix) []masqueradeSpec {
	var specs []masqueradeSpec
	for _, f := range []masqFamily{masqIPv4, masqIPv6} {
		s := masqueradeSpec{family: f}
		var keep []netip.Prefix
		for _, p := range podCIDRs {
			if familyOf(p.Addr()).table == f.table {
				s.podCIDRs = append(s.podCIDRs, p.Masked())
				keep = append(keep, p)
			}
		}
		if len(s.podCIDRs) == 0 {
			continue
		}
		for _, p := range noMasquerade {
			if p.IsValid() && familyOf(p.Addr()).table == f.table {
				keep = append(keep, p)
			}
		}
		s.keep = noMasqueradeRanges(keep)
		specs = append(specs, s)
	}
	return specs
}

// SyncMasquerade makes pod traffic to any address outside noMasquerade
// (the other nodes' pod CIDRs and the Service ranges; the node's own pod
// CIDR is always added) leave masqueraded behind the node's address. It
// writes the whole table of each family the node has a pod CIDR in, from
// scratch and in one netlink batch, so that whatever a previous agent (or
// a crash halfway) left is replaced at once and no packet ever sees a
// half-written table; connections already masqueraded keep their
// translation, which lives in conntrack. Calling it again with the same
// prefixes does nothing. Ensure must have set the pod CIDR.
func (n *Network) SyncMasquerade(noMasquerade []netip.Prefix) error {
	pods := n.podCIDRs()
	if len(pods) == 0 {
		return errors.New("the pod network has no pod CIDR yet")
	}
	specs := masqueradeSpecs(pods, noMasquerade)
	var key strings.Builder
	for _, s := range specs {
		key.WriteString(s.String() + ";")
	}
	n.masqMu.Lock()
	defer n.masqMu.Unlock()
	if n.masqApplied == key.String() {
		return nil
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(n.node)))
	if err != nil {
		return fmt.Errorf("nftables in the node namespace: %w", err)
	}
	for _, s := range specs {
		if err := writeMasqueradeTable(conn, MasqueradeTable, BridgeName, s); err != nil {
			return err
		}
	}
	// Until a batch succeeds, the kernel's tables are not known.
	n.masqApplied = ""
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("write the %s tables: %w", MasqueradeTable, err)
	}
	n.masqApplied = key.String()
	return nil
}

// WriteMasquerade queues, on conn, the table name that masquerades
// traffic from sources leaving by any interface but inside (and not to
// sources themselves), written whole as SyncMasquerade writes the pod
// network's: what `svcnet up --nodes N` does for its nodes' network, as
// Docker does for its bridges.
func WriteMasquerade(conn *nftables.Conn, name, inside string, sources []netip.Prefix) error {
	for _, s := range masqueradeSpecs(sources, nil) {
		if err := writeMasqueradeTable(conn, name, inside, s); err != nil {
			return err
		}
	}
	return nil
}

// writeMasqueradeTable queues s's table name: created if missing and
// deleted, so that the batch starts from nothing, then written whole.
func writeMasqueradeTable(conn *nftables.Conn, name, inside string, s masqueradeSpec) error {
	f := s.family
	t := &nftables.Table{Name: name, Family: f.table}
	conn.AddTable(t)
	conn.DelTable(t)
	t = conn.AddTable(t)
	set := &nftables.Set{Table: t, Name: noMasqueradeSet, KeyType: f.keyType, Interval: true}
	if err := conn.AddSet(set, intervalElements(s.keep)); err != nil {
		return fmt.Errorf("set %s: %w", noMasqueradeSet, err)
	}
	prio := nftables.ChainPriority(srcnat)
	policy := nftables.ChainPolicyAccept
	c := conn.AddChain(&nftables.Chain{Table: t, Name: masqueradeChain, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: &prio, Policy: &policy})
	for _, p := range s.podCIDRs {
		conn.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: masqueradeRule(f, p, set.Name, inside)})
	}
	return nil
}

// masqueradeRule is
//
//	ip saddr POD-CIDR oifname != INSIDE ip daddr != @no-masquerade masquerade fully-random
func masqueradeRule(f masqFamily, pods netip.Prefix, set, inside string) []expr.Any {
	mask := netaddr.Mask(pods)
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddrOff, Len: f.addrLen},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: f.addrLen, Mask: mask, Xor: make([]byte, f.addrLen)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: pods.Masked().Addr().AsSlice()},
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifnameData(inside)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOff, Len: f.addrLen},
		&expr.Lookup{SourceRegister: 1, SetName: set, Invert: true},
		// Fully random ports, as kube-proxy's and kindnet's masquerade:
		// no two pods race for one source port.
		&expr.Masq{FullyRandom: true},
	}
}

// ifnameData is an interface name as nft compares it: IFNAMSIZ bytes.
func ifnameData(name string) []byte {
	b := make([]byte, 16)
	copy(b, name)
	return b
}

// removeMasquerade deletes the pod network's tables in every family.
func (n *Network) removeMasquerade() error {
	n.masqMu.Lock()
	defer n.masqMu.Unlock()
	n.masqApplied = ""
	conn, err := nftables.New(nftables.WithNetNSFd(int(n.node)))
	if err != nil {
		return fmt.Errorf("nftables in the node namespace: %w", err)
	}
	return DeleteTables(conn, MasqueradeTable)
}

// DeleteTables deletes the tables called name, in every family, on conn
// (flushed).
func DeleteTables(conn *nftables.Conn, name string) error {
	var errs []error
	found := false
	for _, f := range []masqFamily{masqIPv4, masqIPv6} {
		tables, err := conn.ListTablesOfFamily(f.table)
		if err != nil {
			errs = append(errs, fmt.Errorf("list nftables tables: %w", err))
			continue
		}
		for _, t := range tables {
			if t.Name == name {
				conn.DelTable(t)
				found = true
			}
		}
	}
	if found {
		if err := conn.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("delete the %s tables: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
