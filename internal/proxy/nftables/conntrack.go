package nftables

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/proxy"
)

// conntrack clears UDP flows that would keep going to endpoints that are
// gone, as kube-proxy does: UDP has no connection to break, so without
// this a client that keeps its source port (a DNS resolver) would send to
// a dead pod until the flow times out.
type conntrack struct {
	h *netlink.Handle
}

func newConntrack(nsPath string) (*conntrack, error) {
	ns := netns.None()
	if nsPath != "" {
		var err error
		if ns, err = netns.GetFromPath(nsPath); err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", nsPath, err)
		}
		defer ns.Close()
	} else {
		var err error
		if ns, err = netns.Get(); err != nil {
			return nil, fmt.Errorf("open own network namespace: %w", err)
		}
		defer ns.Close()
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("conntrack netlink: %w", err)
	}
	return &conntrack{h: h}, nil
}

// flow selects UDP conntrack entries by original destination (address,
// when set, and port) and, when set, the endpoint the flow was DNATed to:
// the reply's source address and port.
type flow struct {
	dst      netip.Addr
	port     int32
	endpoint netip.AddrPort
}

// MatchConntrackFlow makes a flow netlink's filter of conntrack entries.
func (f flow) MatchConntrackFlow(c *netlink.ConntrackFlow) bool {
	if c.Forward.Protocol != unix.IPPROTO_UDP || c.Forward.DstPort != uint16(f.port) {
		return false
	}
	if f.dst.IsValid() && !net.IP(f.dst.AsSlice()).Equal(c.Forward.DstIP) {
		return false
	}
	if ep := f.endpoint; ep.IsValid() {
		return net.IP(ep.Addr().AsSlice()).Equal(c.Reverse.SrcIP) && c.Reverse.SrcPort == ep.Port()
	}
	return true
}

// staleFlows are the UDP flows the changes make stale: those to an
// endpoint (address and port: a changed targetPort makes the old port's
// flows stale) that is no longer used, and those to a Service port that
// had no endpoint before (its packets were never DNATed).
func staleFlows(changed map[string]proxy.Change) []flow {
	var out []flow
	for _, ch := range changed {
		if ch.Previous == nil {
			continue
		}
		for _, prev := range ch.Previous.Ports {
			if prev.Protocol != corev1.ProtocolUDP {
				continue
			}
			var cur *proxy.ServicePort
			if ch.Current != nil {
				for _, p := range ch.Current.Ports {
					if p.Name == prev.Name && p.Protocol == prev.Protocol {
						cur = p
					}
				}
			}
			was, now := used(prev), used(cur)
			dsts := append(append(append([]netip.Addr{}, prev.ClusterIPs...), prev.ExternalIPs...), prev.LoadBalancerIPs...)
			for ep := range was {
				if now[ep] {
					continue
				}
				for _, d := range dsts {
					out = append(out, flow{dst: d, port: prev.Port, endpoint: ep})
				}
				if prev.NodePort != 0 {
					out = append(out, flow{port: prev.NodePort, endpoint: ep})
				}
			}
			if len(was) == 0 && len(now) > 0 {
				for _, d := range dsts {
					out = append(out, flow{dst: d, port: cur.Port})
				}
				if cur.NodePort != 0 {
					out = append(out, flow{port: cur.NodePort})
				}
			}
		}
	}
	return out
}

// used are the endpoints (address and port) a port's traffic may go to.
func used(p *proxy.ServicePort) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	if p == nil {
		return out
	}
	for _, e := range append(p.ClusterEndpoints(), p.LocalEndpoints()...) {
		out[netip.AddrPortFrom(e.Addr, uint16(e.Port))] = true
	}
	return out
}

func (c *conntrack) cleanStale(u proxy.Update) error {
	changed := make(map[string]proxy.Change, len(u.Changed))
	for name, ch := range u.Changed {
		changed[name.String()] = ch
	}
	flows := staleFlows(changed)
	if len(flows) == 0 {
		return nil
	}
	var v4, v6 []netlink.CustomConntrackFilter
	for _, f := range flows {
		if f.endpoint.Addr().Is6() || f.dst.Is6() {
			v6 = append(v6, f)
		} else {
			v4 = append(v4, f)
		}
	}
	for fam, filters := range map[netlink.InetFamily][]netlink.CustomConntrackFilter{unix.AF_INET: v4, unix.AF_INET6: v6} {
		if len(filters) == 0 {
			continue
		}
		if _, err := c.h.ConntrackDeleteFilters(netlink.ConntrackTable, fam, filters...); err != nil {
			return err
		}
	}
	return nil
}

// conntrackTimeouts are kube-proxy's defaults for the TCP conntrack
// timeouts (--conntrack-tcp-timeout-established 24h,
// --conntrack-tcp-timeout-close-wait 1h): an idle long-lived connection
// through a Service keeps its NAT, and one half-closed by its server keeps
// it for an hour, where the kernel's defaults are 5 days and 60 seconds.
var conntrackTimeouts = map[string]int{
	"nf_conntrack_tcp_timeout_established": 86400,
	"nf_conntrack_tcp_timeout_close_wait":  3600,
}

// setConntrackTimeouts writes conntrackTimeouts into the calling thread's
// network namespace, those that differ, as kube-proxy's conntrack
// configurer does.
func setConntrackTimeouts() error {
	for name, want := range conntrackTimeouts {
		p := filepath.Join("/proc/sys/net/netfilter", name)
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // no conntrack in this kernel
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if strings.TrimSpace(string(b)) == strconv.Itoa(want) {
			continue
		}
		if err := os.WriteFile(p, []byte(strconv.Itoa(want)), 0o644); err != nil {
			return fmt.Errorf("set %s: %w", p, err)
		}
	}
	return nil
}
