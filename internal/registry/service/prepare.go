package service

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/allocator"
)

// This file holds what upstream's Service registry does to a Service
// before validating it (storage.go's beginCreate/beginUpdate and
// strategy.go's dropTypeDependentFields): keep clusterIP and clusterIPs in
// step, refill allocated values a client left out, default the IP families
// from the cluster's ranges, and clear fields a type change made moot.

func needsClusterIP(svc *corev1.Service) bool { return svc.Spec.Type != corev1.ServiceTypeExternalName }

func needsNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// shouldAllocateNodePorts: NodePort Services always get node ports,
// LoadBalancers unless allocateLoadBalancerNodePorts is false.
func shouldAllocateNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

func policyOf(svc *corev1.Service) corev1.IPFamilyPolicy {
	if svc.Spec.IPFamilyPolicy == nil {
		return ""
	}
	return *svc.Spec.IPFamilyPolicy
}

func sameClusterIPs(a, b *corev1.Service) bool {
	return slices.Equal(a.Spec.ClusterIPs, b.Spec.ClusterIPs)
}

func sameIPFamilies(a, b *corev1.Service) bool {
	return slices.Equal(a.Spec.IPFamilies, b.Spec.IPFamilies)
}

func otherFamily(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

func familyOfString(ip string) corev1.IPFamily {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "unknown"
	}
	return allocator.FamilyOf(a)
}

// normalizeClusterIPs derives clusterIPs from clusterIP for clients that
// only know the singular field. old is nil on create.
func normalizeClusterIPs(svc, old *corev1.Service) {
	spec := &svc.Spec
	if old == nil {
		if spec.ClusterIP != "" && len(spec.ClusterIPs) == 0 {
			spec.ClusterIPs = []string{spec.ClusterIP}
		}
		return
	}
	if len(old.Spec.ClusterIPs) > 0 && len(spec.ClusterIPs) == 0 && old.Spec.ClusterIP == spec.ClusterIP {
		spec.ClusterIPs = slices.Clone(old.Spec.ClusterIPs)
	}
	if old.Spec.ClusterIP != spec.ClusterIP && sameClusterIPs(old, svc) {
		if spec.ClusterIP == "" {
			spec.ClusterIPs = nil
		} else {
			spec.ClusterIPs = []string{spec.ClusterIP}
		}
	}
}

// patchAllocatedValues refills the allocated values an update left out, so
// that re-sending the original manifest keeps them.
func patchAllocatedValues(svc, old *corev1.Service) {
	spec := &svc.Spec
	if needsClusterIP(old) && needsClusterIP(svc) {
		if spec.ClusterIP == "" {
			spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(spec.ClusterIPs) == 0 && len(old.Spec.ClusterIPs) > 0 {
			spec.ClusterIPs = slices.Clone(old.Spec.ClusterIPs)
		}
	}
	if needsNodePort(old) && needsNodePort(svc) {
		// Node ports present in both may not be moved to another port.
		inNew := map[int32]bool{}
		for _, p := range spec.Ports {
			inNew[p.NodePort] = true
		}
		byName := map[string]int32{}
		used := map[int32]bool{}
		for _, p := range old.Spec.Ports {
			byName[p.Name] = p.NodePort
			if p.NodePort != 0 && inNew[p.NodePort] {
				used[p.NodePort] = true
			}
		}
		for i := range spec.Ports {
			if p := &spec.Ports[i]; p.NodePort == 0 && !used[byName[p.Name]] {
				p.NodePort = byName[p.Name]
			}
		}
	}
	if needsHealthCheck(old) && needsHealthCheck(svc) && spec.HealthCheckNodePort == 0 {
		spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
}

// matchingPreferDualStack: an update of a PreferDualStack Service that
// leaves its IPs and families alone is not upgraded or downgraded when the
// cluster's dual-stackness changed.
func matchingPreferDualStack(svc, old *corev1.Service) bool {
	return old != nil && svc.Spec.IPFamilyPolicy != nil && old.Spec.Type == svc.Spec.Type &&
		needsClusterIP(svc) &&
		policyOf(svc) == corev1.IPFamilyPolicyPreferDualStack && policyOf(old) == corev1.IPFamilyPolicyPreferDualStack &&
		sameClusterIPs(old, svc) && sameIPFamilies(old, svc)
}

// initIPFamilies defaults ipFamilyPolicy and ipFamilies from the cluster's
// service CIDRs, as upstream's initIPFamilyFields, and returns the errors
// that make a request fail before any other validation.
func initIPFamilies(cfg *allocator.Config, svc, old *corev1.Service) field.ErrorList {
	spec := &svc.Spec
	if !needsClusterIP(svc) || matchingPreferDualStack(svc, old) {
		return nil
	}
	if spec.IPFamilyPolicy == nil {
		policy := corev1.IPFamilyPolicySingleStack
		switch {
		case old != nil && old.Spec.IPFamilyPolicy != nil:
			policy = *old.Spec.IPFamilyPolicy
		case spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0:
			policy = corev1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &policy
	}
	if errs := validateClusterIPsRelated(svc); len(errs) > 0 {
		return errs
	}
	policyPath := field.NewPath("spec", "ipFamilyPolicy")
	var errs field.ErrorList
	single := policyOf(svc) == corev1.IPFamilyPolicySingleStack
	if old != nil {
		if single {
			// Asking for SingleStack with the IPs untouched releases the
			// secondary.
			if sameClusterIPs(old, svc) && len(spec.ClusterIPs) > 1 {
				spec.ClusterIPs = spec.ClusterIPs[:1]
			}
			if sameIPFamilies(old, svc) && len(spec.IPFamilies) > 1 {
				spec.IPFamilies = spec.IPFamilies[:1]
			}
		} else {
			if len(spec.ClusterIPs) > 0 && len(spec.ClusterIPs) < len(old.Spec.ClusterIPs) {
				errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary cluster IP"))
			}
			if len(spec.IPFamilies) > 0 && len(spec.IPFamilies) < len(old.Spec.IPFamilies) {
				errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary IP family"))
			}
		}
	}
	if single {
		if len(spec.ClusterIPs) == 2 {
			errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
		}
		if len(spec.IPFamilies) == 2 {
			errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
		}
	}
	// Families missing beside given IPs are inferred from the IPs.
	for i, ip := range spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			break
		}
		if i < len(spec.IPFamilies) {
			continue
		}
		family := familyOfString(ip)
		if cfg.Range(family) == nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), spec.ClusterIPs,
				fmt.Sprintf("%s is not configured on this cluster", family)))
		} else {
			spec.IPFamilies = append(spec.IPFamilies, family)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0 {
		// Headless without a selector may name families the cluster does
		// not have: its endpoints are the user's.
		if len(spec.IPFamilies) == 0 {
			spec.IPFamilies = []corev1.IPFamily{cfg.Primary()}
		}
		if len(spec.IPFamilies) < 2 && !single {
			spec.IPFamilies = append(spec.IPFamilies, otherFamily(spec.IPFamilies[0]))
		}
		return nil
	}
	if policyOf(svc) == corev1.IPFamilyPolicyRequireDualStack && !cfg.DualStack() {
		errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "this cluster is not configured for dual-stack services"))
	}
	for i, family := range spec.IPFamilies {
		if cfg.Range(family) == nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilies").Index(i), family, "not configured on this cluster"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{cfg.Primary()}
	}
	if !single && len(spec.IPFamilies) == 1 && cfg.DualStack() {
		spec.IPFamilies = append(spec.IPFamilies, otherFamily(spec.IPFamilies[0]))
	}
	return nil
}

// dropTypeDependentFields clears, on an update that changes the type, the
// fields the new type does not use, unless the user also changed them (in
// which case validation reports the conflict). What was allocated for them
// is released by the write.
func dropTypeDependentFields(svc, old *corev1.Service) {
	spec := &svc.Spec
	if needsClusterIP(old) && !needsClusterIP(svc) {
		if sameClusterIPs(old, svc) && old.Spec.ClusterIP == spec.ClusterIP {
			spec.ClusterIP, spec.ClusterIPs = "", nil
		}
		if sameIPFamilies(old, svc) {
			spec.IPFamilies = nil
		}
		if policyOf(old) == policyOf(svc) {
			spec.IPFamilyPolicy = nil
		}
	}
	if needsNodePort(old) && !needsNodePort(svc) && nodePortsSubset(svc, old) {
		for i := range spec.Ports {
			spec.Ports[i].NodePort = 0
		}
	}
	if needsHealthCheck(old) && !needsHealthCheck(svc) && spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		spec.HealthCheckNodePort = 0
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && spec.Type != corev1.ServiceTypeLoadBalancer {
		if a, b := spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts; a != nil && b != nil && *a == *b {
			spec.AllocateLoadBalancerNodePorts = nil
		}
		if sameLoadBalancerClass(svc, old) {
			spec.LoadBalancerClass = nil
		}
	}
	if needsNodePort(old) && !needsNodePort(svc) && spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		spec.ExternalTrafficPolicy = ""
	}
	if spec.Type != corev1.ServiceTypeLoadBalancer {
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
}

// nodePortsSubset: svc adds no node port number old did not have.
func nodePortsSubset(svc, old *corev1.Service) bool {
	had := map[int32]bool{}
	for _, p := range old.Spec.Ports {
		had[p.NodePort] = true
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !had[p.NodePort] {
			return false
		}
	}
	return true
}

func sameLoadBalancerClass(a, b *corev1.Service) bool {
	x, y := a.Spec.LoadBalancerClass, b.Spec.LoadBalancerClass
	return (x == nil && y == nil) || (x != nil && y != nil && *x == *y)
}
