package quota

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"
)

var (
	podsResource = corev1.SchemeGroupVersion.WithResource("pods")
	podCount     = generic.ObjectCountQuotaResourceNameFor(podsResource.GroupResource())
)

// podResourceNames are the fixed names a pod is charged under.
var podResourceNames = []corev1.ResourceName{
	podCount,
	corev1.ResourcePods,
	corev1.ResourceCPU,
	corev1.ResourceMemory,
	corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU,
	corev1.ResourceRequestsMemory,
	corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory,
	corev1.ResourceLimitsEphemeralStorage,
}

// podResourcePrefixes are the families of names a pod is charged under
// besides podResourceNames: hugepages-<size> and requests.hugepages-<size>.
var podResourcePrefixes = []string{
	corev1.ResourceHugePagesPrefix,
	corev1.ResourceRequestsHugePagesPrefix,
}

// requestsOfDeviceClass prefixes the quota names of the extended
// resources a device class stands for (requests.deviceclass.resource.kubernetes.io/<class>).
var requestsOfDeviceClass = corev1.DefaultResourceRequestsPrefix + resourcev1.ResourceDeviceClassPrefix

// mustSpecify are the names for which a quota obliges every container to
// state the matching request or limit. Upstream keeps this list for
// compatibility only and adds nothing to it.
var mustSpecify = sets.New[corev1.ResourceName](
	corev1.ResourceCPU,
	corev1.ResourceMemory,
	corev1.ResourceRequestsCPU,
	corev1.ResourceRequestsMemory,
	corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory,
)

// podEvaluator measures pods.
type podEvaluator struct {
	list  generic.ListFuncByNamespace
	clock clock.PassiveClock
}

var _ quotav1.Evaluator = (*podEvaluator)(nil)

// NewPodEvaluator is the evaluator of pods: count/pods always, and while
// the pod is not done (see Usage) pods, cpu, memory, ephemeral-storage,
// hugepages-* under their bare, requests. and limits. names, and extended
// resources as requests.<name>. Its scopes are Terminating,
// NotTerminating, BestEffort, NotBestEffort, PriorityClass and
// CrossNamespacePodAffinity. clk tells when a deleted pod's grace period
// is over.
func NewPodEvaluator(f quotav1.ListerForResourceFunc, clk clock.PassiveClock) quotav1.Evaluator {
	return &podEvaluator{list: listFunc(f, podsResource), clock: clk}
}

func (e *podEvaluator) GroupResource() schema.GroupResource {
	return podsResource.GroupResource()
}

// Handles: creates, updates that move a pod in or out of the Terminating
// scope (activeDeadlineSeconds set or cleared), and resizes.
func (e *podEvaluator) Handles(a admission.Attributes) bool {
	op := a.GetOperation()
	switch a.GetSubresource() {
	case "":
		if op == admission.Update {
			pod, err1 := asPod(a.GetObject())
			old, err2 := asPod(a.GetOldObject())
			return err1 == nil && err2 == nil && isTerminating(pod) != isTerminating(old)
		}
		return op == admission.Create
	case "resize":
		return op == admission.Update
	}
	return false
}

// Constraints refuses a pod some container of which lacks the cpu or
// memory request or limit that a quota in required limits, naming them
// by resource and container as upstream does ("must specify
// limits.memory for: app; requests.cpu for: app,sidecar"). Pod-level
// resources lift the obligation.
func (e *podEvaluator) Constraints(required []corev1.ResourceName, obj runtime.Object) error {
	pod, err := asPod(obj)
	if err != nil {
		return err
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	wanted := sets.New(required...).Intersection(mustSpecify)
	if wanted.Len() == 0 {
		return nil
	}
	missing := map[corev1.ResourceName]sets.Set[string]{}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			c := &list[i]
			stated := sets.KeySet(computeUsage(c.Resources.Requests, c.Resources.Limits))
			for name := range wanted.Difference(stated) {
				if missing[name] == nil {
					missing[name] = sets.New[string]()
				}
				missing[name].Insert(c.Name)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	parts := make([]string, 0, len(missing))
	for _, name := range sets.List(sets.KeySet(missing)) {
		parts = append(parts, fmt.Sprintf("%s for: %s", name, strings.Join(sets.List(missing[name]), ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(parts, "; "))
}

func (e *podEvaluator) Matches(q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	return generic.Matches(q, obj, e.MatchingResources, podMatchesScope)
}

// MatchingResources are the names of input a pod can be charged under.
func (e *podEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := quotav1.Intersection(input, podResourceNames)
	for _, name := range input {
		if (quotav1.ContainsPrefix(podResourcePrefixes, name) || isExtendedQuotaName(name)) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (e *podEvaluator) MatchingScopes(obj runtime.Object, selectors []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return matchingScopes(obj, selectors, podMatchesScope)
}

func (e *podEvaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return uncoveredScopes(limited, matched), nil
}

// Usage is count/pods, and unless the pod is done (failed, succeeded, or
// deleted with its grace period over) what its containers request and
// are limited to, summed as the scheduler sums them (init containers,
// sidecars, overhead, pod-level resources, the resources a resize has
// actuated).
func (e *podEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	pod, err := asPod(obj)
	if err != nil {
		return corev1.ResourceList{}, err
	}
	return podUsage(pod, e.clock.Now()), nil
}

func (e *podEvaluator) UsageStats(opts quotav1.UsageStatsOptions) (quotav1.UsageStats, error) {
	return generic.CalculateUsageStats(opts, e.list, podMatchesScope, e.Usage)
}

func podUsage(pod *corev1.Pod, now time.Time) corev1.ResourceList {
	usage := corev1.ResourceList{podCount: *resource.NewQuantity(1, resource.DecimalSI)}
	if !podCharged(pod, now) {
		return usage
	}
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: true}
	requests := resourcehelper.PodRequests(pod, opts)
	limits := resourcehelper.PodLimits(pod, opts)
	return quotav1.Add(usage, computeUsage(requests, limits))
}

// podCharged tells whether a pod's compute resources (and its "pods"
// entry) count: not once it has failed or succeeded, nor once it was
// deleted and its grace period has passed, so that pods stuck
// terminating on a lost node do not hold the namespace's quota.
func podCharged(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
		if now.After(end) {
			return false
		}
	}
	return true
}

// computeUsage names requests and limits as quota does: "pods" 1, cpu,
// memory and ephemeral-storage requests under their bare and requests.
// names and limits under limits., hugepages under hugepages-<size> and
// requests.hugepages-<size>, extended resources under requests.<name>.
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for _, r := range []struct{ name, request, limit corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	} {
		if q, ok := requests[r.name]; ok {
			out[r.name] = q
			out[r.request] = q
		}
		if q, ok := limits[r.name]; ok {
			out[r.limit] = q
		}
	}
	for name, q := range requests {
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			out[name] = q
			out[corev1.DefaultResourceRequestsPrefix+name] = q
		}
		if isExtendedResource(name) || strings.HasPrefix(string(name), resourcev1.ResourceDeviceClassPrefix) {
			out[corev1.DefaultResourceRequestsPrefix+name] = q
		}
	}
	return out
}

// isNativeResource: unqualified names and those in a kubernetes.io domain.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedResource: a container resource from outside kubernetes.io
// (example.com/gpu) whose requests.<name> is a valid quota name.
func isExtendedResource(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// isExtendedQuotaName: requests.<extended resource>, or
// requests.deviceclass.resource.kubernetes.io/<class>. Extended resources
// cannot be overcommitted, so quota knows only their requests.
func isExtendedQuotaName(name corev1.ResourceName) bool {
	if !strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return !isNativeResource(name) || strings.HasPrefix(string(name), requestsOfDeviceClass)
}

func asPod(obj runtime.Object) (*corev1.Pod, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod == nil {
		return nil, fmt.Errorf("expect *v1.Pod, got %T", obj)
	}
	return pod, nil
}

// podMatchesScope tells whether a pod is in a quota's scope.
func podMatchesScope(s corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pod, err := asPod(obj)
	if err != nil {
		return false, err
	}
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return isTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !isTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(pod), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(pod), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if s.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		var set labels.Set
		if pod.Spec.PriorityClassName != "" {
			set = labels.Set{string(corev1.ResourceQuotaScopePriorityClass): pod.Spec.PriorityClassName}
		}
		return selectorMatches(s, set)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// selectorMatches evaluates a scope selector requirement against set, the
// scope name standing for a label key.
func selectorMatches(s corev1.ScopedResourceSelectorRequirement, set labels.Set) (bool, error) {
	var op selection.Operator
	switch s.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return false, fmt.Errorf("failed to parse and convert selector: %q is not a valid scope selector operator", s.Operator)
	}
	req, err := labels.NewRequirement(string(s.ScopeName), op, s.Values)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	return labels.NewSelector().Add(*req).Matches(set), nil
}

// isTerminating: the pod has an active deadline, so it ends by itself.
func isTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// isBestEffort: the pod's QoS class is BestEffort, the one in its status
// if set, else computed: no cpu or memory request or limit, in the
// pod-level resources when those are set, else in any container.
func isBestEffort(pod *corev1.Pod) bool {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass == corev1.PodQOSBestEffort
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return noCPUOrMemory(pod.Spec.Resources)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if !noCPUOrMemory(&list[i].Resources) {
				return false
			}
		}
	}
	return true
}

func noCPUOrMemory(r *corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		if !req.IsZero() || !lim.IsZero() {
			return false
		}
	}
	return true
}

// crossNamespaceAffinity: some pod affinity or anti-affinity term of the
// pod, required or preferred, looks at other namespaces (namespaces or
// namespaceSelector set).
func crossNamespaceAffinity(pod *corev1.Pod) bool {
	if pod.Spec.Affinity == nil {
		return false
	}
	var required []corev1.PodAffinityTerm
	var preferred []corev1.WeightedPodAffinityTerm
	if a := pod.Spec.Affinity.PodAffinity; a != nil {
		required = append(required, a.RequiredDuringSchedulingIgnoredDuringExecution...)
		preferred = append(preferred, a.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	if a := pod.Spec.Affinity.PodAntiAffinity; a != nil {
		required = append(required, a.RequiredDuringSchedulingIgnoredDuringExecution...)
		preferred = append(preferred, a.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	for _, w := range preferred {
		required = append(required, w.PodAffinityTerm)
	}
	for _, t := range required {
		if len(t.Namespaces) != 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}
