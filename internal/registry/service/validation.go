package service

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/registry/validate"
)

// Annotations and limits upstream validates services against.
const (
	topologyModeAnnotation      = "service.kubernetes.io/topology-mode"
	topologyHintsAnnotation     = "service.kubernetes.io/topology-aware-hints"
	sourceRangesAnnotation      = "service.beta.kubernetes.io/load-balancer-source-ranges"
	maxClientIPAffinitySeconds  = 86400
	trafficDistributionClose    = "PreferClose"
	trafficDistributionZone     = "PreferSameZone"
	trafficDistributionSameNode = "PreferSameNode"
)

var (
	serviceTypes = []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}
	affinityTypes        = []corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}
	trafficPolicies      = []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}
	internalPolicies     = []corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}
	trafficDistributions = []string{trafficDistributionClose, trafficDistributionZone, trafficDistributionSameNode}
)

// portKey is how upstream's internal ServicePort renders in a "Duplicate
// value" message: Go field names, since internal types have no JSON tags.
type portKey struct {
	Name        string
	Protocol    corev1.Protocol
	AppProtocol *string
	Port        int32
	TargetPort  intstr.IntOrString
	NodePort    int32
}

func isHeadless(svc *corev1.Service) bool {
	return len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone
}

// validateService follows upstream's ValidateService in order. A zero
// healthCheckNodePort is accepted where one is needed: the write allocates
// it, as upstream allocates before it validates.
func validateService(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	if mode, ok := svc.Annotations[topologyModeAnnotation]; ok {
		if hints, ok := svc.Annotations[topologyHintsAnnotation]; ok && hints != mode {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(topologyModeAnnotation), mode,
				fmt.Sprintf("must match annotations[%s] when both are specified", topologyHintsAnnotation)))
		}
	}
	if len(spec.Ports) == 0 && !isHeadless(svc) && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	switch spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if isHeadless(svc) {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0],
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if len(spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		if name := strings.TrimSuffix(spec.ExternalName, "."); name != "" {
			errs = append(errs, validate.DNSSubdomain(name, specPath.Child("externalName"))...)
		} else {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		}
	}

	names := map[string]bool{}
	for i := range spec.Ports {
		errs = append(errs, validatePort(&spec.Ports[i], len(spec.Ports) > 1, names, specPath.Child("ports").Index(i))...)
	}
	if spec.Selector != nil {
		errs = append(errs, metavalidation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	}
	errs = append(errs, sessionAffinity(spec, specPath)...)
	errs = append(errs, validateClusterIPsRelated(svc)...)
	for i, ip := range spec.ExternalIPs {
		p := specPath.Child("externalIPs").Index(i)
		if e := validate.IP(ip, p); len(e) != 0 {
			errs = append(errs, e...)
		} else {
			errs = append(errs, validate.NonSpecialIP(ip, p)...)
		}
	}
	switch spec.Type {
	case "":
		errs = append(errs, field.Required(specPath.Child("type"), ""))
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("type"), spec.Type, serviceTypes))
	}
	if spec.Type == corev1.ServiceTypeClusterIP {
		for i, port := range spec.Ports {
			if port.NodePort != 0 {
				errs = append(errs, field.Forbidden(specPath.Child("ports").Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}
	errs = append(errs, duplicatePorts(spec, specPath.Child("ports"))...)
	errs = append(errs, sourceRanges(svc)...)
	if spec.AllocateLoadBalancerNodePorts != nil && spec.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		errs = append(errs, field.Required(field.NewPath("allocateLoadBalancerNodePorts"), ""))
	}
	if class := spec.LoadBalancerClass; class != nil {
		if spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Forbidden(specPath.Child("loadBalancerClass"), "may only be used when `type` is 'LoadBalancer'"))
		} else {
			errs = append(errs, validate.QualifiedName(*class, specPath.Child("loadBalancerClass"))...)
		}
	}
	errs = append(errs, trafficPolicy(svc, specPath)...)
	if td := spec.TrafficDistribution; td != nil {
		switch *td {
		case trafficDistributionClose, trafficDistributionZone, trafficDistributionSameNode:
		default:
			errs = append(errs, field.NotSupported(specPath.Child("trafficDistribution"), *td, trafficDistributions))
		}
	}
	return errs
}

func validatePort(sp *corev1.ServicePort, requireName bool, names map[string]bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && sp.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if sp.Name != "" {
		errs = append(errs, validate.DNSLabel(sp.Name, p.Child("name"))...)
		if names[sp.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), sp.Name))
		}
		names[sp.Name] = true
	}
	errs = append(errs, validate.PortNumber(sp.Port, p.Child("port"))...)
	errs = append(errs, validate.Protocol(sp.Protocol, p.Child("protocol"))...)
	errs = append(errs, validate.PortNumOrName(sp.TargetPort, p.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		errs = append(errs, validate.QualifiedName(*sp.AppProtocol, p.Child("appProtocol"))...)
	}
	return errs
}

func sessionAffinity(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	p := specPath.Child("sessionAffinityConfig")
	switch spec.SessionAffinity {
	case "":
		return field.ErrorList{field.Required(specPath.Child("sessionAffinity"), "")}
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone))}
		}
	case corev1.ServiceAffinityClientIP:
		why := fmt.Sprintf("when session affinity type is %s", corev1.ServiceAffinityClientIP)
		switch c := spec.SessionAffinityConfig; {
		case c == nil:
			return field.ErrorList{field.Required(p, why)}
		case c.ClientIP == nil:
			return field.ErrorList{field.Required(p.Child("clientIP"), why)}
		case c.ClientIP.TimeoutSeconds == nil:
			return field.ErrorList{field.Required(p.Child("clientIP").Child("timeoutSeconds"), why)}
		case *c.ClientIP.TimeoutSeconds <= 0 || *c.ClientIP.TimeoutSeconds > maxClientIPAffinitySeconds:
			return field.ErrorList{field.Invalid(p.Child("clientIP").Child("timeoutSeconds"), c.ClientIP.TimeoutSeconds,
				fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds))}
		}
	default:
		return field.ErrorList{field.NotSupported(specPath.Child("sessionAffinity"), spec.SessionAffinity, affinityTypes)}
	}
	return nil
}

// duplicatePorts rejects two ports with the same protocol and port, or the
// same protocol and node port.
func duplicatePorts(spec *corev1.ServiceSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	nodePorts := map[portKey]bool{}
	for i, port := range spec.Ports {
		if port.NodePort == 0 {
			continue
		}
		key := portKey{Protocol: port.Protocol, NodePort: port.NodePort}
		if nodePorts[key] {
			errs = append(errs, field.Duplicate(p.Index(i).Child("nodePort"), port.NodePort))
		}
		nodePorts[key] = true
	}
	seen := map[portKey]bool{}
	for i, port := range spec.Ports {
		key := portKey{Protocol: port.Protocol, Port: port.Port}
		if seen[key] {
			errs = append(errs, field.Duplicate(p.Index(i), key))
		}
		seen[key] = true
	}
	return errs
}

// sourceRanges checks loadBalancerSourceRanges, or the older annotation.
func sourceRanges(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	notLB := svc.Spec.Type != corev1.ServiceTypeLoadBalancer
	const onlyLB = "may only be used when `type` is 'LoadBalancer'"
	if ranges := svc.Spec.LoadBalancerSourceRanges; len(ranges) > 0 {
		p := field.NewPath("spec", "LoadBalancerSourceRanges") // upstream's spelling
		if notLB {
			errs = append(errs, field.Forbidden(p, onlyLB))
		}
		for i, r := range ranges {
			errs = append(errs, validation.IsValidCIDRForLegacyField(p.Index(i), strings.TrimSpace(r), false, nil)...)
		}
	} else if val, ok := svc.Annotations[sourceRangesAnnotation]; ok {
		p := field.NewPath("metadata", "annotations").Key(sourceRangesAnnotation)
		if notLB {
			errs = append(errs, field.Forbidden(p, onlyLB))
		}
		if val = strings.TrimSpace(val); val != "" {
			for _, r := range strings.Split(val, ",") {
				errs = append(errs, validation.IsValidCIDRForLegacyField(p, strings.TrimSpace(r), false, nil)...)
			}
		}
	}
	return errs
}

func trafficPolicy(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	etp := specPath.Child("externalTrafficPolicy")
	switch {
	case !externallyAccessible(svc):
		if spec.ExternalTrafficPolicy != "" {
			errs = append(errs, field.Invalid(etp, spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		}
	case spec.ExternalTrafficPolicy == "":
		errs = append(errs, field.Required(etp, ""))
	case spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster && spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal:
		errs = append(errs, field.NotSupported(etp, spec.ExternalTrafficPolicy, trafficPolicies))
	}
	hc := specPath.Child("healthCheckNodePort")
	if !needsHealthCheck(svc) {
		if spec.HealthCheckNodePort != 0 {
			errs = append(errs, field.Invalid(hc, spec.HealthCheckNodePort,
				"may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
	} else if spec.HealthCheckNodePort != 0 {
		errs = append(errs, validate.PortNumber(spec.HealthCheckNodePort, hc)...)
	}
	itp := specPath.Child("internalTrafficPolicy")
	if spec.InternalTrafficPolicy == nil {
		switch spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			errs = append(errs, field.Required(itp, ""))
		}
	} else if p := *spec.InternalTrafficPolicy; p != corev1.ServiceInternalTrafficPolicyCluster && p != corev1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(itp, p, internalPolicies))
	}
	return errs
}

var (
	ipFamilies       = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	ipFamilyPolicies = []corev1.IPFamilyPolicy{corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack,
		corev1.IPFamilyPolicySingleStack}
)

// validateClusterIPsRelated is upstream's
// ValidateServiceClusterIPsRelatedFields: clusterIP, clusterIPs,
// ipFamilies and ipFamilyPolicy on their own and against each other.
func validateClusterIPsRelated(svc *corev1.Service) field.ErrorList {
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	ipsPath := field.NewPath("spec", "clusterIPs")
	if spec.ClusterIP != "" {
		if len(spec.ClusterIPs) == 0 {
			errs = append(errs, field.Required(ipsPath, ""))
		} else if spec.ClusterIPs[0] != spec.ClusterIP {
			errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
		}
	} else if len(spec.ClusterIPs) != 0 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}
	famPath := field.NewPath("spec", "ipFamilies")
	seen := map[corev1.IPFamily]bool{}
	for i, f := range spec.IPFamilies {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			errs = append(errs, field.NotSupported(famPath.Index(i), f, ipFamilies))
		}
		if seen[f] {
			errs = append(errs, field.Duplicate(famPath.Index(i), f))
		}
		seen[f] = true
	}
	if p := spec.IPFamilyPolicy; p != nil && !slices.Contains(ipFamilyPolicies, *p) {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "ipFamilyPolicy"), p, ipFamilyPolicies))
	}
	badIPs := false
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				badIPs = true
				errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		// Cluster IPs never held lenient forms: the allocator refused them.
		if e := validate.StrictIP(ip, ipsPath.Index(i), nil); len(e) > 0 {
			badIPs = true
			errs = append(errs, e...)
		}
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	// Further checks on bad addresses would only repeat the problem.
	if badIPs {
		return errs
	}
	if len(spec.ClusterIPs) > 1 {
		if dual, err := netutils.IsDualStackIPStrings(spec.ClusterIPs); err != nil {
			errs = append(errs, field.InternalError(ipsPath, fmt.Errorf("failed to check for dual stack with error:%v", err)))
		} else if !dual {
			errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may specify no more than one IP for each IP family"))
		}
	}
	if !isHeadless(svc) {
		for i, ip := range spec.ClusterIPs {
			if i >= len(spec.IPFamilies) {
				break
			}
			v6 := netutils.IsIPv6String(ip)
			if spec.IPFamilies[i] == corev1.IPv4Protocol && v6 {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%d]`", i)))
			}
			if spec.IPFamilies[i] == corev1.IPv6Protocol && !v6 {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%d]`", i)))
			}
		}
	}
	return errs
}

// validateUpdate holds upstream's update-only Service rules: allocated
// cluster IPs and families change only by adding or releasing the
// secondary, loadBalancerClass and healthCheckNodePort are immutable.
func validateUpdate(svc, old *corev1.Service) field.ErrorList {
	errs := clusterIPsUpdate(svc, old)
	errs = append(errs, ipFamiliesUpdate(svc, old)...)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && old.Spec.Type == corev1.ServiceTypeLoadBalancer && !sameLoadBalancerClass(svc, old) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "loadBalancerClass"), svc.Spec.LoadBalancerClass, "may not change once set"))
	}
	if needsHealthCheck(old) && needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort != old.Spec.HealthCheckNodePort {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "healthCheckNodePort"), "field is immutable"))
	}
	return errs
}

func clusterIPsUpdate(svc, old *corev1.Service) field.ErrorList {
	if !needsClusterIP(svc) || !needsClusterIP(old) || (isHeadless(svc) && isHeadless(old)) {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "clusterIPs")
	ips, was := svc.Spec.ClusterIPs, old.Spec.ClusterIPs
	const changed = "may not change once set"
	switch {
	case len(was) == len(ips):
		for i := range was {
			if was[i] != ips[i] {
				errs = append(errs, field.Invalid(p.Index(i), ips, changed))
			}
		}
	case len(was) > len(ips):
		if len(ips) == 0 {
			errs = append(errs, field.Invalid(p.Index(0), ips, "primary clusterIP can not be unset"))
		} else if ips[0] != was[0] {
			errs = append(errs, field.Invalid(p.Index(0), ips, changed))
		}
		if len(ips) == 1 && policyOf(svc) != corev1.IPFamilyPolicySingleStack {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy,
				"must be set to 'SingleStack' when releasing the secondary clusterIP"))
		}
	default:
		if len(was) > 0 && ips[0] != was[0] {
			errs = append(errs, field.Invalid(p.Index(0), ips, changed))
		}
	}
	return errs
}

func ipFamiliesUpdate(svc, old *corev1.Service) field.ErrorList {
	if !needsClusterIP(svc) || !needsClusterIP(old) || isHeadless(svc) || isHeadless(old) {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "ipFamilies").Index(0)
	fams, was := svc.Spec.IPFamilies, old.Spec.IPFamilies
	const changed = "may not change once set"
	switch {
	case len(was) == len(fams):
		for i := range was {
			if was[i] != fams[i] {
				errs = append(errs, field.Invalid(p, fams, changed))
			}
		}
	case len(was) > len(fams):
		// Upstream checks the cluster IPs here and prints them as the
		// value; the messages are its own.
		if len(svc.Spec.ClusterIPs) == 0 {
			errs = append(errs, field.Invalid(p, fams, "primary ipFamily can not be unset"))
		}
		if len(fams) > 0 && fams[0] != was[0] {
			errs = append(errs, field.Invalid(p, svc.Spec.ClusterIPs, changed))
		}
		if len(fams) == 1 && policyOf(svc) != corev1.IPFamilyPolicySingleStack {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy,
				"must be set to 'SingleStack' when releasing the secondary ipFamily"))
		}
	default:
		if len(was) > 0 && len(fams) > 0 && fams[0] != was[0] {
			errs = append(errs, field.Invalid(p, svc.Spec.ClusterIPs, changed))
		}
	}
	return errs
}
