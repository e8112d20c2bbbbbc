package endpoints

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/controller/endpointutil"
	"github.com/svcnet/svcnet/internal/controller/podstate"
)

// maxCapacity is the most addresses an Endpoints object holds.
const maxCapacity = 1000

// desiredSubsets lists the selected pods' addresses per Service port, in
// upstream's canonical packing.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	tolerate := svc.Spec.PublishNotReadyAddresses
	p := newPacker()
	for _, pod := range pods {
		if !endpointutil.HasEndpoint(pod, tolerate) {
			continue
		}
		addr, ok := podAddress(svc, pod)
		if !ok {
			continue
		}
		ready := tolerate || podstate.Ready(pod)
		if len(svc.Spec.Ports) == 0 {
			// A headless Service may have no ports; its addresses are
			// still published.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				p.add(addr, nil, ready)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			num, ok := endpointutil.FindPort(pod, sp)
			if !ok {
				continue
			}
			p.add(addr, &corev1.EndpointPort{Name: sp.Name, Port: num, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}, ready)
		}
	}
	return p.subsets()
}

// podAddress is a pod's address for the Service: its IP of the Service's
// primary family (for a Service without families, the cluster IP's family,
// or for a headless one the pod's own first IP's).
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, bool) {
	ipv6 := false
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		ipv6 = svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		ipv6 = netutils.IsIPv6String(svc.Spec.ClusterIP)
	default:
		ipv6 = netutils.IsIPv6String(pod.Status.PodIP)
	}
	for _, ip := range pod.Status.PodIPs {
		if netutils.IsIPv6String(ip.IP) != ipv6 {
			continue
		}
		addr := corev1.EndpointAddress{
			IP:        ip.IP,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		}
		if pod.Spec.NodeName != "" {
			addr.NodeName = new(pod.Spec.NodeName)
		}
		if hostname, ok := endpointutil.Hostname(pod, svc); ok {
			addr.Hostname = hostname
		}
		return addr, true
	}
	return corev1.EndpointAddress{}, false
}

// packer groups addresses into subsets of identical port sets, as
// upstream's RepackSubsets: an address that is not ready on one port is
// not ready on all the ports it shares a subset with.
type packer struct {
	addrs map[addrKey]*corev1.EndpointAddress
	ports map[string]*portAddrs
}

// addrKey tells addresses apart: one IP may serve two pods.
type addrKey struct {
	ip  string
	uid types.UID
}

// portAddrs are the addresses serving one port (nil: no port) and whether
// each is ready.
type portAddrs struct {
	port  *corev1.EndpointPort
	ready map[addrKey]bool
}

func newPacker() *packer {
	return &packer{addrs: map[addrKey]*corev1.EndpointAddress{}, ports: map[string]*portAddrs{}}
}

func keyOf(a *corev1.EndpointAddress) addrKey {
	k := addrKey{ip: a.IP}
	if a.TargetRef != nil {
		k.uid = a.TargetRef.UID
	}
	return k
}

func portString(p *corev1.EndpointPort) string {
	if p == nil {
		return ""
	}
	app := ""
	if p.AppProtocol != nil {
		app = *p.AppProtocol
	}
	return fmt.Sprintf("%s/%d/%s/%s", p.Name, p.Port, p.Protocol, app)
}

func (p *packer) add(addr corev1.EndpointAddress, port *corev1.EndpointPort, ready bool) {
	k := keyOf(&addr)
	if p.addrs[k] == nil {
		p.addrs[k] = &addr
	}
	ps := portString(port)
	pa := p.ports[ps]
	if pa == nil {
		pa = &portAddrs{port: port, ready: map[addrKey]bool{}}
		p.ports[ps] = pa
	}
	if was, seen := pa.ready[k]; !seen || was {
		pa.ready[k] = ready
	}
}

// subsets builds one subset per distinct set of (address, readiness),
// carrying every port served by exactly that set, in sorted order.
func (p *packer) subsets() []corev1.EndpointSubset {
	type group struct {
		ready map[addrKey]bool
		ports []corev1.EndpointPort
	}
	groups := map[string]*group{}
	for _, pa := range p.ports {
		keys := make([]string, 0, len(pa.ready))
		for k, r := range pa.ready {
			keys = append(keys, fmt.Sprintf("%s/%s/%t", k.ip, k.uid, r))
		}
		slices.Sort(keys)
		sig := strings.Join(keys, ",")
		g := groups[sig]
		if g == nil {
			g = &group{ready: pa.ready}
			groups[sig] = g
		}
		if pa.port != nil {
			g.ports = append(g.ports, *pa.port)
		}
	}
	out := make([]corev1.EndpointSubset, 0, len(groups))
	for _, g := range groups {
		var s corev1.EndpointSubset
		for k, ready := range g.ready {
			if ready {
				s.Addresses = append(s.Addresses, *p.addrs[k])
			} else {
				s.NotReadyAddresses = append(s.NotReadyAddresses, *p.addrs[k])
			}
		}
		slices.SortFunc(s.Addresses, compareAddresses)
		slices.SortFunc(s.NotReadyAddresses, compareAddresses)
		slices.SortFunc(g.ports, func(a, b corev1.EndpointPort) int { return strings.Compare(portString(&a), portString(&b)) })
		s.Ports = g.ports
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b corev1.EndpointSubset) int { return strings.Compare(subsetString(a), subsetString(b)) })
	return out
}

// compareAddresses orders by IP, then target UID, as upstream.
func compareAddresses(a, b corev1.EndpointAddress) int {
	ka, kb := keyOf(&a), keyOf(&b)
	return cmp.Or(strings.Compare(ka.ip, kb.ip), strings.Compare(string(ka.uid), string(kb.uid)))
}

func subsetString(s corev1.EndpointSubset) string {
	var b strings.Builder
	for i := range s.Ports {
		b.WriteString(portString(&s.Ports[i]) + ";")
	}
	for _, a := range s.Addresses {
		b.WriteString(a.IP + ";")
	}
	for _, a := range s.NotReadyAddresses {
		b.WriteString(a.IP + ";")
	}
	return b.String()
}

// sameSubsets compares subsets ignoring the pods' resourceVersions.
func sameSubsets(a, b []corev1.EndpointSubset) bool {
	strip := func(in []corev1.EndpointSubset) []corev1.EndpointSubset {
		out := make([]corev1.EndpointSubset, len(in))
		for i := range in {
			out[i] = *in[i].DeepCopy()
			for _, addrs := range [][]corev1.EndpointAddress{out[i].Addresses, out[i].NotReadyAddresses} {
				for j := range addrs {
					if addrs[j].TargetRef != nil {
						addrs[j].TargetRef.ResourceVersion = ""
					}
				}
			}
		}
		return out
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// count is the number of ready and not-ready addresses.
func count(subsets []corev1.EndpointSubset) (ready, notReady int) {
	for _, s := range subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	return ready, notReady
}

// capacityAnnotated says whether the over-capacity annotation is absent
// and need not be set.
func capacityAnnotated(ep *corev1.Endpoints) bool {
	ready, notReady := count(ep.Subsets)
	_, annotated := ep.Annotations[corev1.EndpointsOverCapacity]
	return ready+notReady <= maxCapacity && !annotated
}

// truncate cuts an Endpoints object down to maxCapacity addresses, keeping
// ready ones first: when the ready ones alone fit, only not-ready ones are
// cut; otherwise every not-ready one goes and the ready ones are cut. Each
// subset keeps its proportional share, rounded up. It reports whether
// anything was cut.
func truncate(ep *corev1.Endpoints) bool {
	ready, notReady := count(ep.Subsets)
	if ready+notReady <= maxCapacity {
		return false
	}
	cutReady := ready > maxCapacity
	limit, total := maxCapacity-ready, notReady
	if cutReady {
		limit, total = maxCapacity, ready
	}
	left := limit
	for i := range ep.Subsets {
		s := &ep.Subsets[i]
		n := len(s.NotReadyAddresses)
		if cutReady {
			n = len(s.Addresses)
		}
		keep := min(int(math.Ceil(float64(n)/float64(total)*float64(limit))), left)
		if cutReady {
			s.Addresses = s.Addresses[:min(keep, len(s.Addresses))]
			s.NotReadyAddresses = []corev1.EndpointAddress{}
			left -= len(s.Addresses)
		} else {
			s.NotReadyAddresses = s.NotReadyAddresses[:min(keep, len(s.NotReadyAddresses))]
			left -= len(s.NotReadyAddresses)
		}
	}
	return true
}
