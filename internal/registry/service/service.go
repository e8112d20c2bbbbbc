// Package service is the Service strategy: upstream's defaults and
// validation with upstream's messages, IP family defaulting from the
// cluster's service CIDRs, cluster IP and node port allocation committed
// with each write (see alloc.go), and the columns of `kubectl get services`.
package service

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes services, allocated from alloc.
func Resource(alloc allocator.Services) *registry.Resource {
	return &registry.Resource{
		Kind:                corev1.SchemeGroupVersion.WithKind("Service"),
		Resource:            "services",
		Singular:            "service",
		ShortNames:          []string{"svc"},
		Categories:          []string{"all"},
		Namespaced:          true,
		NameValidation:      apivalidation.NameIsDNSLabel, // RelaxedServiceNameValidation, GA in 1.37
		Status:              true,
		ReturnDeletedObject: true,
		Strategy:            strategy{cfg: alloc.Config(), alloc: alloc},
		Columns:             columns(),
		Fields: func(obj runtime.Object) fields.Set {
			svc := obj.(*corev1.Service)
			return fields.Set{"spec.clusterIP": svc.Spec.ClusterIP, "spec.type": string(svc.Spec.Type)}
		},
	}
}

type strategy struct {
	registry.Base
	cfg   *allocator.Config
	alloc allocator.Services
}

// Default is upstream's SetDefaults_Service.
func (strategy) Default(obj runtime.Object) {
	svc := obj.(*corev1.Service)
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		spec.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if c := spec.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)}}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		port := &spec.Ports[i]
		if port.Protocol == "" {
			port.Protocol = corev1.ProtocolTCP
		}
		if port.TargetPort == intstr.FromInt32(0) || port.TargetPort == intstr.FromString("") {
			port.TargetPort = intstr.FromInt32(port.Port)
		}
	}
	if externallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	switch spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if spec.InternalTrafficPolicy == nil {
			spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		}
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.AllocateLoadBalancerNodePorts == nil {
			spec.AllocateLoadBalancerNodePorts = ptr.To(true)
		}
		for i, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" && ing.IPMode == nil {
				svc.Status.LoadBalancer.Ingress[i].IPMode = ptr.To(corev1.LoadBalancerIPModeVIP)
			}
		}
	}
}

// PrepareForCreate mirrors a single clusterIP into clusterIPs and defaults
// the IP families, as upstream's registry does before it allocates.
func (s strategy) PrepareForCreate(obj runtime.Object) {
	svc := obj.(*corev1.Service)
	normalizeClusterIPs(svc, nil)
	s.defaultIPFamilies(svc, nil)
	dropExternalNameTrafficPolicy(svc)
}

// PrepareForUpdate refills allocated values the client left out, defaults
// the IP families, and clears what a type change made moot.
func (s strategy) PrepareForUpdate(obj, old runtime.Object) {
	svc, prev := obj.(*corev1.Service), old.(*corev1.Service)
	patchAllocatedValues(svc, prev)
	normalizeClusterIPs(svc, prev)
	s.defaultIPFamilies(svc, prev)
	dropTypeDependentFields(svc, prev)
	dropExternalNameTrafficPolicy(svc)
}

// defaultIPFamilies applies initIPFamilies unless it finds errors, which
// validation reports by running it again on the untouched request.
func (s strategy) defaultIPFamilies(svc, old *corev1.Service) {
	c := svc.DeepCopy()
	if len(initIPFamilies(s.cfg, c, old)) == 0 {
		svc.Spec = c.Spec
	}
}

// dropExternalNameTrafficPolicy: upstream keeps a stored
// internalTrafficPolicy on an ExternalName Service but never shows it.
func dropExternalNameTrafficPolicy(svc *corev1.Service) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		svc.Spec.InternalTrafficPolicy = nil
	}
}

// Validate reports, like upstream, the IP family errors alone when there
// are any (they stop a request before its other fields are looked at).
func (s strategy) Validate(obj runtime.Object) field.ErrorList {
	svc := obj.(*corev1.Service)
	if errs := initIPFamilies(s.cfg, svc.DeepCopy(), nil); len(errs) > 0 {
		return errs
	}
	return validateService(svc)
}

func (s strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	svc, prev := obj.(*corev1.Service), old.(*corev1.Service)
	if errs := initIPFamilies(s.cfg, svc.DeepCopy(), prev); len(errs) > 0 {
		return errs
	}
	return append(validateUpdate(svc, prev), validateService(svc)...)
}

// externallyAccessible: load balancers, node ports, and cluster IPs with
// external IPs can be reached from outside the cluster.
func externallyAccessible(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeClusterIP:
		return len(svc.Spec.ExternalIPs) > 0
	}
	return false
}

func needsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func columns() []registry.Column {
	cell := func(f func(*corev1.Service) string) func(runtime.Object) interface{} {
		return func(o runtime.Object) interface{} { return f(o.(*corev1.Service)) }
	}
	spec := corev1.ServiceSpec{}.SwaggerDoc()
	return []registry.Column{
		registry.NameColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Type", Type: "string", Description: spec["type"]},
			Cell: cell(func(s *corev1.Service) string { return string(s.Spec.Type) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Cluster-IP", Type: "string", Description: spec["clusterIP"]},
			Cell: cell(func(s *corev1.Service) string {
				if len(s.Spec.ClusterIPs) == 0 {
					return "<none>"
				}
				return s.Spec.ClusterIPs[0]
			})},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "External-IP", Type: "string", Description: spec["externalIPs"]},
			Cell: cell(externalIP)},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Port(s)", Type: "string", Description: spec["ports"]},
			Cell: cell(ports)},
		registry.AgeColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1, Description: spec["selector"]},
			Cell: cell(func(s *corev1.Service) string { return labels.FormatLabels(s.Spec.Selector) })},
	}
}

// externalIP is the EXTERNAL-IP cell, in its untruncated (wide) form.
func externalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		seen := map[string]bool{}
		var lb []string
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			addr := ing.IP
			if addr == "" {
				addr = ing.Hostname
			}
			if addr != "" && !seen[addr] {
				seen[addr] = true
				lb = append(lb, addr)
			}
		}
		sort.Strings(lb)
		all := append(lb, svc.Spec.ExternalIPs...)
		if len(all) == 0 {
			return "<pending>"
		}
		return strings.Join(all, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

func ports(svc *corev1.Service) string {
	if len(svc.Spec.Ports) == 0 {
		return "<none>"
	}
	pieces := make([]string, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		if p.NodePort > 0 {
			pieces[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			pieces[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(pieces, ",")
}
