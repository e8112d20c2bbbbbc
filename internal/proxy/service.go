package proxy

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Service is what a backend programs for one Service: its ports, each with
// the addresses that capture it and the endpoints behind it. A headless or
// ExternalName Service has no ports.
type Service struct {
	Name  types.NamespacedName
	Ports []*ServicePort
	// HealthCheckNodePort is served by the node for externalTrafficPolicy
	// Local (0: none).
	HealthCheckNodePort int32
}

// ServicePort is one port of a Service with its endpoints.
type ServicePort struct {
	// Name is the port's name ("" for a single unnamed port).
	Name     string
	Protocol corev1.Protocol
	Port     int32
	// NodePort is 0 unless the Service is of type NodePort or LoadBalancer.
	NodePort int32
	// ClusterIPs are the Service's cluster IPs, one per family.
	ClusterIPs []netip.Addr
	// ExternalIPs are spec.externalIPs; LoadBalancerIPs the ingress IPs of
	// status.loadBalancer (those with ipMode Proxy are left out, as
	// upstream's proxies do: the load balancer delivers to the node).
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr
	// SourceRanges is spec.loadBalancerSourceRanges.
	SourceRanges []netip.Prefix
	// AffinitySeconds is the ClientIP session affinity timeout, 0 without
	// affinity.
	AffinitySeconds int32
	// ExternalLocal is externalTrafficPolicy Local on an externally
	// reachable Service; InternalLocal is internalTrafficPolicy Local.
	ExternalLocal bool
	InternalLocal bool
	// Endpoints are every endpoint of the port in the Service's
	// EndpointSlices, in a stable order, whatever their state.
	Endpoints []Endpoint
}

// Endpoint is one address and port behind a ServicePort.
type Endpoint struct {
	Addr netip.Addr
	Port int32
	// Ready, Serving and Terminating are the EndpointSlice conditions, with
	// upstream's defaults for unset ones.
	Ready, Serving, Terminating bool
	// Local is set when the endpoint runs on this node.
	Local bool
}

// String is ip:port, the way upstream names endpoints.
func (e Endpoint) String() string {
	return netip.AddrPortFrom(e.Addr, uint16(e.Port)).String()
}

// String is namespace/name:port, upstream's ServicePortName.
func (p *ServicePort) String(svc types.NamespacedName) string {
	return fmt.Sprintf("%s:%s", svc, p.Name)
}

// ExternallyAccessible reports whether traffic from outside the cluster
// reaches the port (NodePort, externalIPs or load balancer IPs).
func (p *ServicePort) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.ExternalIPs) > 0 || len(p.LoadBalancerIPs) > 0
}

// ClusterEndpoints are the endpoints traffic with policy Cluster goes to:
// the ready ones, or, when none is ready, the serving terminating ones
// (upstream's fallback, so that a rolling update never drops traffic).
func (p *ServicePort) ClusterEndpoints() []Endpoint {
	return usable(p.Endpoints, func(Endpoint) bool { return true })
}

// LocalEndpoints are the endpoints on this node that policy Local uses,
// with the same fallback to serving terminating ones.
func (p *ServicePort) LocalEndpoints() []Endpoint {
	return usable(p.Endpoints, func(e Endpoint) bool { return e.Local })
}

// families is a set of IP families: 1 for IPv4, 2 for IPv6.
type families uint8

func familyOf(a netip.Addr) families {
	if a.Is4() {
		return 1
	}
	return 2
}

// rejected are the families of p's cluster IPs in which p has no usable
// endpoint (ClusterEndpoints), where backends reject its traffic as a
// Service's without endpoints; served are those in which it has one.
func (p *ServicePort) rejected() (rejected, served families) {
	var ips, eps families
	for _, a := range p.ClusterIPs {
		ips |= familyOf(a)
	}
	for _, e := range p.ClusterEndpoints() {
		eps |= familyOf(e.Addr)
	}
	return ips &^ eps, ips & eps
}

// rejects reports whether backends reject traffic to some port of s for
// want of endpoints.
func (s *Service) rejects() bool {
	for _, p := range s.Ports {
		if r, _ := p.rejected(); r != 0 {
			return true
		}
	}
	return false
}

// unrejects reports whether cur has usable endpoints for a port (the same
// protocol and number) in an address family in which prev has none:
// applying cur makes the Service reachable where it refused connections.
func unrejects(prev, cur *Service) bool {
	for _, p := range prev.Ports {
		rejected, _ := p.rejected()
		if rejected == 0 {
			continue
		}
		for _, q := range cur.Ports {
			if _, served := q.rejected(); q.Protocol == p.Protocol && q.Port == p.Port && rejected&served != 0 {
				return true
			}
		}
	}
	return false
}

func usable(eps []Endpoint, keep func(Endpoint) bool) []Endpoint {
	var ready, terminating []Endpoint
	for _, e := range eps {
		switch {
		case !keep(e):
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			terminating = append(terminating, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// newService builds the proxy's view of svc and its slices for node.
func newService(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, node string) *Service {
	s := &Service{Name: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return s
	}
	clusterIPs := parseAddrs(svc.Spec.ClusterIPs)
	if len(clusterIPs) == 0 {
		clusterIPs = parseAddrs([]string{svc.Spec.ClusterIP})
	}
	if len(clusterIPs) == 0 {
		return s
	}
	external := parseAddrs(svc.Spec.ExternalIPs)
	var lbIPs []netip.Addr
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IPMode != nil && *in.IPMode == corev1.LoadBalancerIPModeProxy {
				continue
			}
			lbIPs = append(lbIPs, parseAddrs([]string{in.IP})...)
		}
	}
	var ranges []netip.Prefix
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		if p, err := netip.ParsePrefix(r); err == nil {
			ranges = append(ranges, p.Masked())
		}
	}
	var affinity int32
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		affinity = corev1.DefaultClientIPServiceAffinitySeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			affinity = *c.ClientIP.TimeoutSeconds
		}
	}
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		p := &ServicePort{
			Name:            sp.Name,
			Protocol:        sp.Protocol,
			Port:            sp.Port,
			ClusterIPs:      clusterIPs,
			ExternalIPs:     external,
			LoadBalancerIPs: lbIPs,
			SourceRanges:    ranges,
			AffinitySeconds: affinity,
			InternalLocal:   internalLocal,
			Endpoints:       endpointsFor(sp, slices, node),
		}
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			p.NodePort = sp.NodePort
		}
		p.ExternalLocal = p.ExternallyAccessible() && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
		if p.ExternalLocal {
			s.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
		}
		s.Ports = append(s.Ports, p)
	}
	return s
}

// endpointsFor collects the endpoints of the slices' port that matches sp
// by name and protocol, once per address and port, sorted.
func endpointsFor(sp *corev1.ServicePort, list []*discoveryv1.EndpointSlice, node string) []Endpoint {
	protocol := sp.Protocol
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	seen := map[netip.AddrPort]bool{}
	var out []Endpoint
	for _, sl := range list {
		var port int32
		found := false
		for _, p := range sl.Ports {
			pName, pProto := "", corev1.ProtocolTCP
			if p.Name != nil {
				pName = *p.Name
			}
			if p.Protocol != nil {
				pProto = *p.Protocol
			}
			if pName == sp.Name && pProto == protocol && p.Port != nil {
				port, found = *p.Port, true
				break
			}
		}
		if !found {
			continue
		}
		for _, ep := range sl.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			addr, err := netip.ParseAddr(ep.Addresses[0])
			if err != nil {
				continue
			}
			ap := netip.AddrPortFrom(addr.Unmap(), uint16(port))
			if seen[ap] {
				continue
			}
			seen[ap] = true
			// Upstream: unset ready means ready, unset serving follows ready,
			// unset terminating means not terminating.
			e := Endpoint{Addr: ap.Addr(), Port: port, Ready: true}
			if c := ep.Conditions.Ready; c != nil {
				e.Ready = *c
			}
			e.Serving = e.Ready
			if c := ep.Conditions.Serving; c != nil {
				e.Serving = *c
			}
			if c := ep.Conditions.Terminating; c != nil {
				e.Terminating = *c
			}
			e.Local = ep.NodeName != nil && *ep.NodeName == node
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return int(a.Port - b.Port)
	})
	return out
}

func parseAddrs(list []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range list {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
