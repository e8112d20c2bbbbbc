package service

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

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

// validateService follows upstream's ValidateService in order, leaving out
// the cluster IP and IP family rules that belong with allocation.
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
	} else if spec.HealthCheckNodePort == 0 {
		errs = append(errs, field.Required(hc, ""))
	} else {
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
