// Package nodenet is the network `svcnet up --nodes N` runs its nodes on,
// what a Docker network is to kind's node containers: a bridge in up's
// own network namespace holding the network's first address, and one
// network namespace per node, pinned under /var/run/netns by the node's
// name (so that `ip netns exec NODE ...` looks inside), joined to the
// bridge by a veth pair whose node end is eth0 with the node's address and
// a default route through the bridge.
//
// Nodes reach each other and up's namespace (where kubectl reaches the
// API server) over the bridge. Their traffic to anywhere else is
// forwarded by up's namespace and masqueraded behind its address there
// (the nftables table svcnet-nodes), as Docker does for its bridges, so
// that pods on the nodes reach outside addresses; forwarding is turned on
// in up's namespace for that, and left on. Everything is made
// idempotently, so that an up that crashed adopts what it left, and Remove
// takes it all away.
package nodenet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netns"
)

// BridgeName is the nodes' bridge in up's namespace.
const BridgeName = "svcnet-nodes"

// MasqueradeTable masquerades the nodes' traffic out of up's namespace.
const MasqueradeTable = "svcnet-nodes"

// DefaultCIDR is the nodes' network unless --node-cidr says otherwise: up
// holds 10.250.0.1, node i (from 1) holds 10.250.0.(i+1).
const DefaultCIDR = "10.250.0.0/24"

// nodeInterface is the node's end of its veth pair.
const nodeInterface = "eth0"

// Node is one node of the network.
type Node struct {
	// Name is the node's name and its namespace's name.
	Name string
	// NetNS is the path that pins the node's network namespace.
	NetNS string
	// IP is the node's address on the network.
	IP netip.Addr
}

// Network is the nodes' network, made or adopted by Create.
type Network struct {
	// Gateway is up's address on the bridge, the nodes' default route.
	Gateway netip.Addr
	// Prefix is the network.
	Prefix netip.Prefix
	// Nodes are the nodes in the order of Create's names.
	Nodes []Node
}

// Plan is the Network Create makes for names on cidr, without making it.
func Plan(cidr string, names []string) (*Network, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return nil, fmt.Errorf("node network %q is not an IPv4 CIDR", cidr)
	}
	p = p.Masked()
	n := &Network{Prefix: p, Gateway: p.Addr().Next()}
	ip := n.Gateway
	for _, name := range names {
		ip = ip.Next()
		if !p.Contains(ip) || ip == lastAddress(p) {
			return nil, fmt.Errorf("node network %s has no room for %d nodes", p, len(names))
		}
		n.Nodes = append(n.Nodes, Node{Name: name, NetNS: netns.Path(name), IP: ip})
	}
	return n, nil
}

// lastAddress is p's broadcast address.
func lastAddress(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	return netip.AddrFrom4(b)
}

// Create makes (or completes) the network of n in the process's network
// namespace, as Plan laid it out.
func (n *Network) Create() error {
	host, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer host.Close()
	br, err := ensureBridge(host, n.Gateway, n.Prefix.Bits())
	if err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable forwarding for the nodes: %w", err)
	}
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	if err := cni.WriteMasquerade(conn, MasqueradeTable, BridgeName, []netip.Prefix{n.Prefix}); err != nil {
		return err
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("write the %s table: %w", MasqueradeTable, err)
	}
	for i, node := range n.Nodes {
		if err := n.ensureNode(host, br, node, hostEnd(i)); err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	return nil
}

// hostEnd is the bridge end of the i-th node's veth pair.
func hostEnd(i int) string { return fmt.Sprintf("svcnet-n%d", i+1) }

// ensureBridge makes the bridge with the gateway address, up.
func ensureBridge(h *netlink.Handle, gw netip.Addr, bits int) (netlink.Link, error) {
	br, err := h.LinkByName(BridgeName)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		la := netlink.NewLinkAttrs()
		la.Name = BridgeName
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("create bridge %s: %w", BridgeName, err)
		}
		br, err = h.LinkByName(BridgeName)
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", BridgeName, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: gw.AsSlice(), Mask: net.CIDRMask(bits, 32)}}
	if err := h.AddrReplace(br, addr); err != nil {
		return nil, fmt.Errorf("address %s on %s: %w", addr, BridgeName, err)
	}
	if err := h.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("set %s up: %w", BridgeName, err)
	}
	return br, nil
}

// ensureNode makes the node's namespace (or adopts the one pinned under
// its name), its veth pair into the bridge, its address and routes.
func (n *Network) ensureNode(host *netlink.Handle, br netlink.Link, node Node, hostEnd string) error {
	if _, err := os.Stat(node.NetNS); errors.Is(err, os.ErrNotExist) {
		if err := netns.Create(node.NetNS); err != nil {
			return err
		}
	} else if !netns.Pinned(node.NetNS) {
		return fmt.Errorf("%s exists and is not a network namespace", node.NetNS)
	}
	ns, err := vnetns.GetFromPath(node.NetNS)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", node.NetNS, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", node.NetNS, err)
	}
	defer h.Close()
	if _, err := host.LinkByName(hostEnd); errors.As(err, new(netlink.LinkNotFoundError)) {
		// A node end left without its pair (after a crash) is replaced.
		if old, err := h.LinkByName(nodeInterface); err == nil {
			_ = h.LinkDel(old)
		}
		la := netlink.NewLinkAttrs()
		la.Name = hostEnd
		veth := &netlink.Veth{LinkAttrs: la, PeerName: nodeInterface, PeerNamespace: netlink.NsFd(ns)}
		if err := host.LinkAdd(veth); err != nil {
			return fmt.Errorf("create veth %s: %w", hostEnd, err)
		}
	}
	hl, err := host.LinkByName(hostEnd)
	if err != nil {
		return fmt.Errorf("look up %s: %w", hostEnd, err)
	}
	if err := host.LinkSetMaster(hl, br); err != nil {
		return fmt.Errorf("attach %s to %s: %w", hostEnd, BridgeName, err)
	}
	if err := host.LinkSetUp(hl); err != nil {
		return fmt.Errorf("set %s up: %w", hostEnd, err)
	}
	for _, name := range []string{"lo", nodeInterface} {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("look up %s in %s: %w", name, node.Name, err)
		}
		if name == nodeInterface {
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: node.IP.AsSlice(), Mask: net.CIDRMask(n.Prefix.Bits(), 32)}}
			if err := h.AddrReplace(l, addr); err != nil {
				return fmt.Errorf("address %s on %s: %w", addr, name, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up in %s: %w", name, node.Name, err)
		}
	}
	eth, err := h.LinkByName(nodeInterface)
	if err != nil {
		return fmt.Errorf("look up %s: %w", nodeInterface, err)
	}
	def := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: n.Gateway.AsSlice(), Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}}
	if err := h.RouteReplace(def); err != nil {
		return fmt.Errorf("default route via %s: %w", n.Gateway, err)
	}
	return nil
}

// Remove takes the nodes' namespaces (and with them the veth pairs) and the
// bridge away. The nodes must have stopped; what is already gone is
// skipped.
func (n *Network) Remove() error {
	var errs []error
	for _, node := range n.Nodes {
		errs = append(errs, netns.Remove(node.NetNS))
	}
	host, err := netlink.NewHandle()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("netlink: %w", err))...)
	}
	defer host.Close()
	for i := range n.Nodes {
		// A namespace that lingers (a process still in it) keeps its veth.
		if l, err := host.LinkByName(hostEnd(i)); err == nil {
			if err := host.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", l.Attrs().Name, err))
			}
		}
	}
	if br, err := host.LinkByName(BridgeName); err == nil {
		if err := host.LinkDel(br); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", BridgeName, err))
		}
	}
	if conn, err := nftables.New(); err != nil {
		errs = append(errs, fmt.Errorf("nftables: %w", err))
	} else {
		errs = append(errs, cni.DeleteTables(conn, MasqueradeTable))
	}
	return errors.Join(errs...)
}
