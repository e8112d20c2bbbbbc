package cni

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// EnsureBridge makes (or adopts) the bridge name in h's namespace with
// address addr, up. It is idempotent.
func EnsureBridge(h *netlink.Handle, name string, addr *net.IPNet) error {
	br, err := h.LinkByName(name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		la := netlink.NewLinkAttrs()
		la.Name = name
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create bridge %s: %w", name, err)
		}
		br, err = h.LinkByName(name)
	}
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	// A bridge whose address was never set takes the lowest of its ports'
	// addresses, so it would change as ports come and go and leave the
	// neighbor entries for the gateway pointing nowhere: pin it.
	if err := h.LinkSetHardwareAddr(br, br.Attrs().HardwareAddr); err != nil {
		return fmt.Errorf("pin the hardware address of %s: %w", name, err)
	}
	if err := h.AddrReplace(br, &netlink.Addr{IPNet: addr}); err != nil {
		return fmt.Errorf("address %s on %s: %w", addr, name, err)
	}
	if err := h.LinkSetUp(br); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// Port is a veth pair from a bridge into another network namespace: a
// pod's, or a node's of `svcnet up --nodes N`.
type Port struct {
	// Bridge holds HostEnd, the pair's end in the bridge's namespace.
	Bridge, HostEnd string
	// Hairpin lets traffic from the port go back out of it.
	Hairpin bool
	// Addr is eth0's address in the other namespace; Gateway its default
	// route.
	Addr    *net.IPNet
	Gateway net.IP
}

// Attach makes (or completes, after a crash) p from the bridge in h's
// namespace into the namespace ns: loopback up there, eth0 with the
// address and the default route. A half-made pair is made anew.
func Attach(h *netlink.Handle, ns vnetns.NsHandle, p Port) error {
	far, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in the namespace of %s: %w", p.HostEnd, err)
	}
	defer far.Close()
	_, hostErr := h.LinkByName(p.HostEnd)
	_, farErr := far.LinkByName(podInterface)
	if hostErr != nil || farErr != nil {
		if hostErr == nil {
			if err := h.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.HostEnd}}); err != nil {
				return fmt.Errorf("delete stale %s: %w", p.HostEnd, err)
			}
		}
		if farErr == nil {
			if err := far.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: podInterface}}); err != nil {
				return fmt.Errorf("delete stale %s of %s: %w", podInterface, p.HostEnd, err)
			}
		}
		if err := addVeth(h, ns, p); err != nil {
			return err
		}
	}
	if err := setLinkUp(far, "lo"); err != nil {
		return err
	}
	eth, err := far.LinkByName(podInterface)
	if err != nil {
		return fmt.Errorf("look up %s of %s: %w", podInterface, p.HostEnd, err)
	}
	if err := far.AddrReplace(eth, &netlink.Addr{IPNet: p.Addr}); err != nil {
		return fmt.Errorf("address %s on %s of %s: %w", p.Addr, podInterface, p.HostEnd, err)
	}
	if err := far.LinkSetUp(eth); err != nil {
		return fmt.Errorf("set %s of %s up: %w", podInterface, p.HostEnd, err)
	}
	route := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: p.Gateway, Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}}
	if err := far.RouteReplace(route); err != nil {
		return fmt.Errorf("default route via %s of %s: %w", p.Gateway, p.HostEnd, err)
	}
	return nil
}

// addVeth creates p's pair, the host end on the bridge and up.
func addVeth(h *netlink.Handle, ns vnetns.NsHandle, p Port) error {
	br, err := h.LinkByName(p.Bridge)
	if err != nil {
		return fmt.Errorf("look up %s: %w", p.Bridge, err)
	}
	la := netlink.NewLinkAttrs()
	la.Name = p.HostEnd
	la.MasterIndex = br.Attrs().Index
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: podInterface, PeerNamespace: netlink.NsFd(ns)}); err != nil {
		return fmt.Errorf("create veth %s: %w", p.HostEnd, err)
	}
	host, err := h.LinkByName(p.HostEnd)
	if err != nil {
		return fmt.Errorf("look up %s: %w", p.HostEnd, err)
	}
	if p.Hairpin {
		if err := h.LinkSetHairpin(host, true); err != nil {
			return fmt.Errorf("hairpin on %s: %w", p.HostEnd, err)
		}
	}
	if err := h.LinkSetUp(host); err != nil {
		return fmt.Errorf("set %s up: %w", p.HostEnd, err)
	}
	return nil
}
