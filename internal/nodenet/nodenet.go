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
	"path/filepath"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netaddr"
	"github.com/svcnet/svcnet/internal/netns"
)

// BridgeName is the nodes' bridge in up's namespace.
const BridgeName = "svcnet-nodes"

// MasqueradeTable masquerades the nodes' traffic out of up's namespace.
const MasqueradeTable = "svcnet-nodes"

// DefaultCIDR is the nodes' network unless --node-network says otherwise:
// up holds 10.250.0.1, node i (from 1) holds 10.250.0.(i+1).
const DefaultCIDR = "10.250.0.0/24"

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
	// dir records which namespaces the network made: only those are
	// adopted after a crash and removed, never another's of the same name.
	dir string
}

// Plan is the Network Create makes for names on cidr, without making it;
// dir (in the cluster's data dir) records what it made.
func Plan(cidr string, names []string, dir string) (*Network, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return nil, fmt.Errorf("node network %q is not an IPv4 CIDR", cidr)
	}
	p = p.Masked()
	n := &Network{Prefix: p, Gateway: p.Addr().Next(), dir: dir}
	ip := n.Gateway
	for _, name := range names {
		ip = ip.Next()
		if !p.Contains(ip) || ip == netaddr.LastAddr(p) {
			return nil, fmt.Errorf("node network %s has no room for %d nodes", p, len(names))
		}
		n.Nodes = append(n.Nodes, Node{Name: name, NetNS: netns.Path(name), IP: ip})
	}
	return n, nil
}

// Create makes (or completes) the network of n in the process's network
// namespace, as Plan laid it out. It changes nothing when a node's
// namespace exists and is not the network's own.
func (n *Network) Create() error {
	for _, node := range n.Nodes {
		if _, err := os.Stat(node.NetNS); err == nil && !n.made(node) {
			return fmt.Errorf("network namespace %s exists and was not made by this cluster: remove it (ip netns del %s) or name the nodes otherwise (--node-name)", node.NetNS, node.Name)
		}
	}
	host, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer host.Close()
	gw := &net.IPNet{IP: n.Gateway.AsSlice(), Mask: net.CIDRMask(n.Prefix.Bits(), 32)}
	if err := cni.EnsureBridge(host, BridgeName, gw); err != nil {
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
		if err := n.ensureNode(host, node, hostEnd(i)); err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	return nil
}

// hostEnd is the bridge end of the i-th node's veth pair.
func hostEnd(i int) string { return fmt.Sprintf("svcnet-n%d", i+1) }

// marker is the file that says the network made node's namespace.
func (n *Network) marker(node Node) string { return filepath.Join(n.dir, node.Name+".netns") }

// made reports whether the network made node's namespace (it may be
// gone since, or left unpinned by a crash).
func (n *Network) made(node Node) bool {
	_, err := os.Stat(n.marker(node))
	return err == nil
}

// ensureNode makes the node's namespace (or adopts the one it made
// before), its veth pair into the bridge, its address and default route.
func (n *Network) ensureNode(host *netlink.Handle, node Node, hostEnd string) error {
	if !n.made(node) || !netns.Pinned(node.NetNS) {
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", n.dir, err)
		}
		if err := os.WriteFile(n.marker(node), nil, 0o600); err != nil {
			return fmt.Errorf("record the namespace of %s: %w", node.Name, err)
		}
		// What a crash left of ours (a file no longer pinned) goes.
		if err := netns.Remove(node.NetNS); err != nil {
			return err
		}
		if err := netns.Create(node.NetNS); err != nil {
			return err
		}
	}
	ns, err := vnetns.GetFromPath(node.NetNS)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", node.NetNS, err)
	}
	defer ns.Close()
	return cni.Attach(host, ns, cni.Port{Bridge: BridgeName, HostEnd: hostEnd,
		Addr: &net.IPNet{IP: node.IP.AsSlice(), Mask: net.CIDRMask(n.Prefix.Bits(), 32)}, Gateway: n.Gateway.AsSlice()})
}

// Remove takes the nodes' namespaces the network made (and with them the
// veth pairs), the bridge and the masquerade table away. The nodes must
// have stopped; what is already gone is skipped.
func (n *Network) Remove() error {
	var errs []error
	for _, node := range n.Nodes {
		if !n.made(node) {
			continue // not ours
		}
		if err := netns.Remove(node.NetNS); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(n.marker(node)); err != nil {
			errs = append(errs, fmt.Errorf("forget the namespace of %s: %w", node.Name, err))
		}
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
