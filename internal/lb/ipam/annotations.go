package ipam

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MetalLB's annotations, and their older spellings.
const (
	AnnotationAddressPool        = "metallb.io/address-pool"
	AnnotationLoadBalancerIPs    = "metallb.io/loadBalancerIPs"
	AnnotationIPAllocateFromPool = "metallb.io/ip-allocated-from-pool"
	AnnotationAllowSharedIP      = "metallb.io/allow-shared-ip"

	deprecatedPrefix                       = "metallb.universe.tf/"
	deprecatedAnnotationAddressPool        = deprecatedPrefix + "address-pool"
	deprecatedAnnotationLoadBalancerIPs    = deprecatedPrefix + "loadBalancerIPs"
	deprecatedAnnotationIPAllocateFromPool = deprecatedPrefix + "ip-allocated-from-pool"
	deprecatedAnnotationAllowSharedIP      = deprecatedPrefix + "allow-shared-ip"
)

// desiredIPs are the addresses svc asks for, MetalLB's errors.
func desiredIPs(svc *corev1.Service) ([]netip.Addr, family, error) {
	fromAnnotation := annotation(svc, AnnotationLoadBalancerIPs, deprecatedAnnotationLoadBalancerIPs)
	switch {
	case fromAnnotation == "" && svc.Spec.LoadBalancerIP == "":
		return nil, "", nil
	case fromAnnotation != "" && svc.Spec.LoadBalancerIP != "":
		return nil, "", fmt.Errorf("service can not have both %s and svc.Spec.LoadBalancerIP", AnnotationLoadBalancerIPs)
	case fromAnnotation != "":
		var ips []netip.Addr
		for _, s := range strings.Split(fromAnnotation, ",") {
			ip, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				return nil, "", fmt.Errorf("invalid %s: %q", AnnotationLoadBalancerIPs, fromAnnotation)
			}
			ips = append(ips, ip.Unmap())
		}
		f, err := familyOf(addrStrings(ips))
		if err != nil {
			return nil, "", err
		}
		return ips, f, nil
	}
	ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
	if err != nil {
		return nil, "", fmt.Errorf("invalid spec.loadBalancerIP %q", svc.Spec.LoadBalancerIP)
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return []netip.Addr{ip}, ipv4, nil
	}
	return []netip.Addr{ip}, ipv6, nil
}

// sharingKey is svc's allow-shared-ip key.
func sharingKey(svc *corev1.Service) string {
	return annotation(svc, AnnotationAllowSharedIP, deprecatedAnnotationAllowSharedIP)
}

// annotation is the value of the annotation, or of its older spelling.
func annotation(svc *corev1.Service, name, deprecated string) string {
	if v, ok := svc.Annotations[name]; ok {
		return v
	}
	return svc.Annotations[deprecated]
}

func addrStrings(ips []netip.Addr) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}
