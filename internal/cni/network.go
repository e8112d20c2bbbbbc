// Package cni is a node's pod network, what a CNI bridge plugin with
// host-local IPAM does on a Kubernetes node: a bridge svcnet0 holding the
// first address of the node's pod CIDR as the pods' gateway, one network
// namespace per pod joined to the bridge by a veth pair, addresses from the
// pod CIDR recorded in the data dir, routes to other nodes' pod CIDRs
// through their node IPs, and the masquerade of pod traffic that leaves the
// cluster (masquerade.go). Everything is done over netlink, in the node's
// network namespace, which need not be the process's own: a node may run
// inside a named namespace while its API client stays outside.
package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/svcnet/svcnet/internal/netns"
)

// BridgeName is the pod bridge of every node.
const BridgeName = "svcnet0"

// podInterface is the far end of a veth pair: a pod's, or a node's on the
// nodes' network.
const podInterface = "eth0"

// Config places a node's pod network.
type Config struct {
	// NodeNetNS is the path of the node's network namespace; empty means
	// the namespace the process started in.
	NodeNetNS string
	// Dir holds the address records and the pods' namespace files.
	Dir string
}

// Network is one node's pod network.
type Network struct {
	dir  string
	node vnetns.NsHandle
	nl   *netlink.Handle

	// mu guards the pod CIDR in ipam, which Ensure sets.
	mu   sync.Mutex
	ipam *ipam

	// masqMu serializes the writes of the masquerade tables; masqApplied
	// describes what the last successful one wrote ("" when unknown).
	masqMu      sync.Mutex
	masqApplied string
	// hostPortMu serializes the writes of the hostPort table;
	// hostPortApplied is what the last successful one wrote (nil when
	// unknown).
	hostPortMu      sync.Mutex
	hostPortApplied *string
	// changed, when set, is called after a sandbox is set up or torn
	// down (the host ports follow the sandboxes' addresses).
	changed func()
}

// OnSandboxChange has f called after each Setup and Teardown; set it
// before the network is used.
func (n *Network) OnSandboxChange(f func()) { n.changed = f }

// SandboxIP is sandbox id's address, nil when it has none.
func (n *Network) SandboxIP(id string) (net.IP, error) {
	n.mu.Lock()
	a := n.ipam
	n.mu.Unlock()
	return a.lookup(id)
}

// Sandbox is a pod's network: its namespace and address.
type Sandbox struct {
	// ID is the owner's id, the pod UID.
	ID string
	// NetNS is the path that pins the pod's network namespace.
	NetNS string
	IP    net.IP
	// Gateway is the bridge address, the pod's default route.
	Gateway net.IP
}

// Open attaches to the node's namespace and the records in c.Dir.
func Open(c Config) (*Network, error) {
	for _, d := range []string{filepath.Join(c.Dir, "ipam"), filepath.Join(c.Dir, "netns")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	ns, err := openNamespace(c.NodeNetNS)
	if err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink in the node namespace: %w", err)
	}
	return &Network{dir: c.Dir, node: ns, nl: h, ipam: &ipam{dir: filepath.Join(c.Dir, "ipam")}}, nil
}

// Close releases the namespace handle; the network itself stays.
func (n *Network) Close() error {
	n.nl.Close()
	return n.node.Close()
}

// Dialer dials from the node's namespace, as the node's probes do.
func (n *Network) Dialer() netns.Dialer { return netns.NewDialer(n.node) }

// Ensure sets up the node side for podCIDR: loopback up, the bridge with
// the gateway address, forwarding on. It is idempotent.
func (n *Network) Ensure(podCIDR string) error {
	_, cidr, err := net.ParseCIDR(podCIDR)
	if err != nil || cidr.IP.To4() == nil {
		return fmt.Errorf("pod CIDR %q is not an IPv4 CIDR", podCIDR)
	}
	gw := offset(cidr.IP, 1)
	if err := setLinkUp(n.nl, "lo"); err != nil {
		return err
	}
	if err := EnsureBridge(n.nl, BridgeName, &net.IPNet{IP: gw, Mask: cidr.Mask}); err != nil {
		return err
	}
	if err := netns.DoIn(n.node, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}); err != nil {
		return fmt.Errorf("enable forwarding in the node namespace: %w", err)
	}
	n.mu.Lock()
	n.ipam = &ipam{dir: n.ipam.dir, cidr: cidr, gw: gw}
	n.mu.Unlock()
	return nil
}

// NetNSPath is where the namespace of sandbox id is pinned.
func (n *Network) NetNSPath(id string) string { return filepath.Join(n.dir, "netns", id) }

// hostVeth is the node end of id's veth pair: short, stable, unique.
func hostVeth(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "veth" + hex.EncodeToString(sum[:])[:11]
}

// Setup creates (or completes, after a crash) sandbox id's network: an
// address, a namespace, a veth pair into the bridge, the default route.
// Calling it again returns the same sandbox.
func (n *Network) Setup(id string) (*Sandbox, error) {
	n.mu.Lock()
	a := n.ipam
	n.mu.Unlock()
	if a.cidr == nil {
		return nil, errors.New("the pod network has no pod CIDR yet")
	}
	ip, err := a.allocate(id)
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{ID: id, NetNS: n.NetNSPath(id), IP: ip, Gateway: a.gw}
	if _, err := os.Stat(sb.NetNS); errors.Is(err, os.ErrNotExist) {
		if err := netns.Create(sb.NetNS); err != nil {
			return nil, err
		}
	}
	podNS, err := vnetns.GetFromPath(sb.NetNS)
	if err != nil {
		return nil, fmt.Errorf("open pod namespace %s: %w", sb.NetNS, err)
	}
	defer podNS.Close()
	// A pod reaching its own Service through the bridge needs hairpin.
	err = Attach(n.nl, podNS, Port{Bridge: BridgeName, HostEnd: hostVeth(id), Hairpin: true,
		Addr: &net.IPNet{IP: ip, Mask: a.cidr.Mask}, Gateway: a.gw})
	if err != nil {
		return nil, err
	}
	if n.changed != nil {
		n.changed()
	}
	return sb, nil
}

func setLinkUp(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// Teardown removes sandbox id's veth, namespace and address. Processes
// still in the namespace keep it alive, so stop them first.
func (n *Network) Teardown(id string) error {
	var errs []error
	if l, err := n.nl.LinkByName(hostVeth(id)); err == nil {
		if err := n.nl.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete veth of %s: %w", id, err))
		}
	}
	errs = append(errs, netns.Remove(n.NetNSPath(id)))
	n.mu.Lock()
	a := n.ipam
	n.mu.Unlock()
	errs = append(errs, a.release(id))
	if n.changed != nil {
		n.changed()
	}
	return errors.Join(errs...)
}

// Sandboxes lists the ids that hold an address or a namespace.
func (n *Network) Sandboxes() ([]string, error) {
	n.mu.Lock()
	a := n.ipam
	n.mu.Unlock()
	all, err := a.allocations()
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, owner := range all {
		ids = append(ids, owner)
	}
	entries, err := os.ReadDir(filepath.Join(n.dir, "netns"))
	if err != nil {
		return nil, fmt.Errorf("read namespaces: %w", err)
	}
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// GC tears down every sandbox not in keep: what a crash between an
// allocation and its record in the agent would otherwise leak.
func (n *Network) GC(keep map[string]bool) error {
	ids, err := n.Sandboxes()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if !keep[id] {
			errs = append(errs, n.Teardown(id))
		}
	}
	return errors.Join(errs...)
}

// SyncRoutes makes the node's routes to other nodes' pod CIDRs exactly
// routes (pod CIDR → node IP).
func (n *Network) SyncRoutes(routes map[string]net.IP) error {
	existing, err := n.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	var errs []error
	for _, r := range existing {
		if gw, ok := routes[r.Dst.String()]; !ok || !gw.Equal(r.Gw) {
			if err := n.nl.RouteDel(&r); err != nil {
				errs = append(errs, fmt.Errorf("delete route to %s: %w", r.Dst, err))
			}
		}
	}
	for cidr, gw := range routes {
		_, dst, err := net.ParseCIDR(cidr)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod CIDR %q: %w", cidr, err))
			continue
		}
		if err := n.nl.RouteReplace(&netlink.Route{Dst: dst, Gw: gw, Protocol: routeProtocol}); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s: %w", cidr, gw, err))
		}
	}
	return errors.Join(errs...)
}

// Remove takes the node's side of the pod network away once its pods'
// networks are torn down: the masquerade and hostPort tables, the routes to other
// nodes' pods, and the bridge with its address and the routes through it.
func (n *Network) Remove() error {
	errs := []error{n.removeMasquerade(), n.SyncHostPorts(nil), n.SyncRoutes(nil)}
	br, err := n.nl.LinkByName(BridgeName)
	switch {
	case errors.As(err, new(netlink.LinkNotFoundError)):
	case err != nil:
		errs = append(errs, fmt.Errorf("look up %s: %w", BridgeName, err))
	default:
		if err := n.nl.LinkDel(br); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", BridgeName, err))
		}
	}
	return errors.Join(errs...)
}

// RouteServiceRanges makes the node's own connections to cluster IPs
// possible in a node namespace that has no route for them, as a bare
// namespace made for svcnet has none: a connect() to an unrouted address
// fails before the proxy's output rules can rewrite it. Each IPv4 range
// without a route gets one onto the pod bridge; the proxy's rules send the
// packets on to an endpoint, and nothing is ever sent to a cluster IP on
// the wire. A range that already has a route (a default route, say) is
// left alone, and the bridge takes the route with it when it goes.
func (n *Network) RouteServiceRanges(ranges []netip.Prefix) error {
	br, err := n.nl.LinkByName(BridgeName)
	if err != nil {
		return fmt.Errorf("look up %s: %w", BridgeName, err)
	}
	var errs []error
	for _, r := range ranges {
		if !r.Addr().Is4() {
			continue
		}
		if _, err := n.nl.RouteGet(r.Addr().AsSlice()); err == nil {
			continue
		}
		dst := &net.IPNet{IP: r.Masked().Addr().AsSlice(), Mask: net.CIDRMask(r.Bits(), 32)}
		route := &netlink.Route{LinkIndex: br.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK, Protocol: serviceRouteProtocol}
		if err := n.nl.RouteReplace(route); err != nil {
			errs = append(errs, fmt.Errorf("route %s to %s: %w", r, BridgeName, err))
		}
	}
	return errors.Join(errs...)
}

// serviceRouteProtocol marks the routes RouteServiceRanges adds, apart
// from SyncRoutes' own.
const serviceRouteProtocol netlink.RouteProtocol = 0x5d

// routeProtocol marks the routes SyncRoutes owns (an unassigned number in
// /etc/iproute2/rt_protos).
const routeProtocol netlink.RouteProtocol = 0x5c
