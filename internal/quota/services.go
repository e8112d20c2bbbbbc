package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

var (
	servicesResource = corev1.SchemeGroupVersion.WithResource("services")
	serviceCount     = generic.ObjectCountQuotaResourceNameFor(servicesResource.GroupResource())
)

var serviceResourceNames = []corev1.ResourceName{
	serviceCount,
	corev1.ResourceServices,
	corev1.ResourceServicesNodePorts,
	corev1.ResourceServicesLoadBalancers,
}

// serviceEvaluator measures services.
type serviceEvaluator struct {
	list generic.ListFuncByNamespace
}

var _ quotav1.Evaluator = (*serviceEvaluator)(nil)

// NewServiceEvaluator is the evaluator of services: services and
// count/services 1 each, services.loadbalancers 1 for a LoadBalancer,
// services.nodeports the node ports a NodePort or LoadBalancer service
// has or will get. Services have no scopes.
func NewServiceEvaluator(f quotav1.ListerForResourceFunc) quotav1.Evaluator {
	return &serviceEvaluator{list: listFunc(f, servicesResource)}
}

func (e *serviceEvaluator) GroupResource() schema.GroupResource {
	return servicesResource.GroupResource()
}

// Handles creates and updates (an update may change the type).
func (e *serviceEvaluator) Handles(a admission.Attributes) bool {
	if a.GetSubresource() != "" {
		return false
	}
	op := a.GetOperation()
	return op == admission.Create || op == admission.Update
}

func (e *serviceEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error {
	return nil
}

func (e *serviceEvaluator) Matches(q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	return generic.Matches(q, obj, e.MatchingResources, generic.MatchesNoScopeFunc)
}

func (e *serviceEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quotav1.Intersection(input, serviceResourceNames)
}

func (e *serviceEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

func (e *serviceEvaluator) UncoveredQuotaScopes(_, _ []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// Usage of a service. Node ports are counted by intent, as they are not
// allocated yet at admission: every port of a NodePort service and of a
// LoadBalancer, except that a LoadBalancer with
// allocateLoadBalancerNodePorts false counts only the ports that name a
// node port.
func (e *serviceEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok || svc == nil {
		return corev1.ResourceList{}, fmt.Errorf("expect *v1.Service, got %T", obj)
	}
	nodePorts, loadBalancers := int64(0), int64(0)
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		nodePorts = int64(len(svc.Spec.Ports))
	case corev1.ServiceTypeLoadBalancer:
		loadBalancers = 1
		if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					nodePorts++
				}
			}
		} else {
			nodePorts = int64(len(svc.Spec.Ports))
		}
	}
	return corev1.ResourceList{
		serviceCount:                         *resource.NewQuantity(1, resource.DecimalSI),
		corev1.ResourceServices:              *resource.NewQuantity(1, resource.DecimalSI),
		corev1.ResourceServicesNodePorts:     *resource.NewQuantity(nodePorts, resource.DecimalSI),
		corev1.ResourceServicesLoadBalancers: *resource.NewQuantity(loadBalancers, resource.DecimalSI),
	}, nil
}

func (e *serviceEvaluator) UsageStats(opts quotav1.UsageStatsOptions) (quotav1.UsageStats, error) {
	return generic.CalculateUsageStats(opts, e.list, generic.MatchesNoScopeFunc, e.Usage)
}

// quotaServiceType is the part of a service's type quota cares about:
// NodePort, LoadBalancer, or "" for the others.
func quotaServiceType(svc *corev1.Service) corev1.ServiceType {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return svc.Spec.Type
	}
	return ""
}
