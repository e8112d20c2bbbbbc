package controller

import (
	"crypto/tls"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// What the Gateway API controller (package gateway) shares with the
// Ingress controller: how a Service port becomes endpoints, how a TLS
// Secret becomes a certificate, and which addresses a published Service
// has.

// ReadyEndpoints are the ready addresses of the Service port sp from the
// Service's EndpointSlices, at the port the slices give for it (the
// Service's targetPort, named ports resolved per pod), sorted.
func ReadyEndpoints(lister discoverylisters.EndpointSliceLister, svc *corev1.Service, sp *corev1.ServicePort) []netip.AddrPort {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	slcs, _ := lister.EndpointSlices(svc.Namespace).List(sel)
	seen := map[netip.AddrPort]bool{}
	var out []netip.AddrPort
	for _, s := range slcs {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		var port int32
		for _, p := range s.Ports {
			if ptrOr(p.Name, "") == sp.Name && ptrOr(p.Protocol, corev1.ProtocolTCP) == corev1.ProtocolTCP && p.Port != nil {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if !ptrOr(ep.Conditions.Ready, true) {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				ap := netip.AddrPortFrom(ip, uint16(port))
				if !seen[ap] {
					seen[ap] = true
					out = append(out, ap)
				}
			}
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

// Certificates parses kubernetes.io/tls Secrets into key pairs, keeping
// them across builds by UID and resourceVersion; Sweep after each build
// forgets those the build did not ask for. One goroutine uses it.
type Certificates struct{ c certCache }

// Get is the Secret's key pair.
func (c *Certificates) Get(s *corev1.Secret) (*tls.Certificate, error) { return c.c.get(s) }

// Sweep forgets the key pairs no Get asked for since the last Sweep.
func (c *Certificates) Sweep() { c.c.sweep() }

// ServiceAddresses are the addresses clients reach a published Service
// at, as the served Ingresses' status shows them.
func ServiceAddresses(svc *corev1.Service) []networkingv1.IngressLoadBalancerIngress {
	return serviceAddresses(svc)
}
