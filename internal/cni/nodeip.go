package cni

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// ErrNoNodeIP is NodeIP's answer for a namespace without a global IPv4
// address outside the pod network.
var ErrNoNodeIP = errors.New("the node's network namespace has no global IPv4 address outside the pod network " +
	"(give it an interface with an address and a default route, or set --node-ip)")

// NodeIP picks a node's InternalIP in the network namespace pinned at
// nsPath (empty: the process's own), as the kubelet does without
// --node-ip: the first global IPv4 address of the interface the default
// route leaves by, else the first global IPv4 address of any other
// interface but loopback, the pod bridge and its ports. how says which of
// the two it was, for the log.
func NodeIP(nsPath string) (ip net.IP, how string, err error) {
	h, closeHandle, err := handleAt(nsPath)
	if err != nil {
		return nil, "", err
	}
	defer closeHandle()
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, "", fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP != nil && !r.Dst.IP.IsUnspecified() || r.LinkIndex == 0 {
			continue // not a default route
		}
		l, err := h.LinkByIndex(r.LinkIndex)
		if err != nil {
			return nil, "", fmt.Errorf("look up the default route's interface: %w", err)
		}
		if ip, err := globalIPv4(h, l); err != nil || ip != nil {
			return ip, "the address of " + l.Attrs().Name + ", the default route's interface", err
		}
	}
	links, err := h.LinkList()
	if err != nil {
		return nil, "", fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		a := l.Attrs()
		if a.Name == BridgeName || a.MasterIndex != 0 || a.Flags&net.FlagLoopback != 0 {
			continue
		}
		if ip, err := globalIPv4(h, l); err != nil || ip != nil {
			return ip, "the first address of " + a.Name + " (no default route)", err
		}
	}
	return nil, "", ErrNoNodeIP
}

// globalIPv4 is l's first global unicast IPv4 address, nil when it has
// none.
func globalIPv4(h *netlink.Handle, l netlink.Link) (net.IP, error) {
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", l.Attrs().Name, err)
	}
	for _, ad := range addrs {
		if ad.IP.IsGlobalUnicast() {
			return ad.IP, nil
		}
	}
	return nil, nil
}

// LoopbackUp sets lo up in the network namespace pinned at nsPath (empty:
// the process's own): a new namespace has it down, and nothing on loopback
// (etcd, the API server) answers until it is up.
func LoopbackUp(nsPath string) error {
	h, closeHandle, err := handleAt(nsPath)
	if err != nil {
		return err
	}
	defer closeHandle()
	return setLinkUp(h, "lo")
}

// handleAt is a netlink handle in the namespace pinned at nsPath, with
// what closes it.
func handleAt(nsPath string) (*netlink.Handle, func(), error) {
	ns, err := openNamespace(nsPath)
	if err != nil {
		return nil, nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, nil, fmt.Errorf("netlink in network namespace %q: %w", nsPath, err)
	}
	return h, func() { h.Close(); ns.Close() }, nil
}

// openNamespace opens the network namespace pinned at path, or the
// process's own for an empty path.
func openNamespace(path string) (vnetns.NsHandle, error) {
	if path == "" {
		ns, err := vnetns.Get()
		if err != nil {
			return ns, fmt.Errorf("open the process's network namespace: %w", err)
		}
		return ns, nil
	}
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return ns, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	return ns, nil
}
