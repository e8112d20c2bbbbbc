package doctor

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/proxy"
)

// DataPlane reads the nodes' Service proxies back (`svcnet proxy list`):
// each node's frontends of the Service named by service (namespace/name).
type DataPlane func(ctx context.Context, service string) ([]proxy.NodeFrontends, error)

// NodesDataPlane reads the nodes' data planes through the API server's
// nodes/proxy (proxy.ReadNodes).
func NodesDataPlane(client kubernetes.Interface) DataPlane {
	return func(ctx context.Context, service string) ([]proxy.NodeFrontends, error) {
		return proxy.ReadNodes(ctx, client, "", service)
	}
}

// dataPlane compares, on each node, where the Service's cluster IPs go in
// the node's data plane with the ready endpoints of its EndpointSlices:
// a frontend that is missing, or whose backends differ, is drift (the
// proxy has not caught up, or its rules were changed by other hands).
// With internalTrafficPolicy Local a node sends its cluster IPs to its own
// endpoints only, which the comparison leaves alone. The report keeps
// what each node's data plane holds for the Service, and the finding says
// how long ago each node's proxy last synced.
func (d *diagnosis) dataPlane() error {
	svc := d.svc
	if d.opts.DataPlane == nil || svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		return nil
	}
	nodes, err := d.opts.DataPlane(d.ctx, svc.Namespace+"/"+svc.Name)
	if err != nil {
		return fmt.Errorf("read the nodes' data planes: %w", err)
	}
	d.report.DataPlane = nodes
	if svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal {
		return nil
	}
	var inSync []Evidence
	for _, n := range nodes {
		if n.Error != "" {
			d.add(SeverityWarning, DataPlaneUnreadable, fmt.Sprintf("The data plane of node %s could not be read, so whether it forwards the Service as its EndpointSlices say is not known: %s.", n.Node, n.Error))
			continue
		}
		drift := false
		for _, ip := range d.report.ClusterIPs {
			addr, err := netip.ParseAddr(ip)
			if err != nil {
				continue
			}
			for _, p := range svc.Spec.Ports {
				drift = d.compareFrontend(n, netip.AddrPortFrom(addr, uint16(p.Port)), p, addr.Is4()) || drift
			}
		}
		if !drift {
			inSync = append(inSync, ev("node "+n.Node, "last sync "+d.syncAge(n.LastSync)))
		}
	}
	if len(inSync) > 0 {
		d.add(SeverityInfo, DataPlaneInSync, fmt.Sprintf("The data plane of %s matches the Service's EndpointSlices: its cluster IPs go to their ready endpoints, or are refused when there are none.",
			plural(len(inSync), "node", "nodes")), inSync...)
	}
	return nil
}

// syncAge says how long ago a proxy last synced, as kubectl writes ages.
func (d *diagnosis) syncAge(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return duration.HumanDuration(d.now().Sub(t)) + " ago"
}

// compareFrontend reports drift of one cluster IP frontend on one node,
// saying whether it found any.
func (d *diagnosis) compareFrontend(n proxy.NodeFrontends, frontend netip.AddrPort, p corev1.ServicePort, v4 bool) bool {
	proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
	want := d.readyBackends(p.Name, proto, v4)
	name := fmt.Sprintf("%s/%s", frontend, proto)
	i := slices.IndexFunc(n.Frontends, func(f proxy.Frontend) bool {
		return f.Address == frontend && f.Protocol == proto
	})
	if i < 0 {
		d.add(SeverityError, DataPlaneDrift, fmt.Sprintf("Node %s's data plane has no rule for %s, so connections to it from that node's pods are not forwarded. The node's Service proxy has not caught up with the Service, or its rules were changed by hand: its log says which; its next full sync writes them again.", n.Node, name),
			ev("node", n.Node), ev("frontend", name), ev("ready endpoints", backendList(want)), ev("last sync", d.syncAge(n.LastSync)))
		return true
	}
	f := n.Frontends[i]
	got := slices.Clone(f.Backends)
	slices.SortFunc(got, netip.AddrPort.Compare)
	if slices.Equal(got, want) && (len(want) > 0 || f.Reject) {
		return false
	}
	d.add(SeverityError, DataPlaneDrift, fmt.Sprintf("On node %s, %s goes to %s, but the EndpointSlices list %s as ready. The node's Service proxy has not caught up with the EndpointSlices, or its rules were changed by hand: its log says which; its next full sync writes them again.", n.Node, name, frontendTarget(f), backendList(want)),
		ev("node", n.Node), ev("data plane", f.String()), ev("ready endpoints", backendList(want)), ev("last sync", d.syncAge(n.LastSync)))
	return true
}

// readyBackends are the ready endpoints' address:port of the Service port
// named portName in the family, sorted.
func (d *diagnosis) readyBackends(portName string, proto corev1.Protocol, v4 bool) []netip.AddrPort {
	var out []netip.AddrPort
	for _, s := range d.slices {
		var port int32 = -1
		for _, sp := range s.Ports {
			if deref(sp.Name) == portName && sp.Port != nil && cmp.Or(ptr.Deref(sp.Protocol, ""), corev1.ProtocolTCP) == proto {
				port = *sp.Port
			}
		}
		if port < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if !endpointReady(e) {
				continue
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() == v4 {
					out = append(out, netip.AddrPortFrom(ip, uint16(port)))
				}
			}
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return slices.Compact(out)
}

// frontendTarget says where a frontend's connections go.
func frontendTarget(f proxy.Frontend) string {
	switch {
	case f.Reject:
		return "a reject (no endpoints)"
	case f.Drop:
		return "a drop"
	case len(f.Backends) == 0:
		return "no backend"
	}
	return backendList(f.Backends)
}

// backendList is "none", or the backends separated by commas.
func backendList(list []netip.AddrPort) string {
	if len(list) == 0 {
		return "none"
	}
	s := make([]string, len(list))
	for i, b := range list {
		s[i] = b.String()
	}
	return strings.Join(s, ", ")
}
