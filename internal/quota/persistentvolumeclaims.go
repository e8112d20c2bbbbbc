package quota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

var (
	pvcsResource = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	pvcCount     = generic.ObjectCountQuotaResourceNameFor(pvcsResource.GroupResource())
)

// pvcResourceNames are the names a claim is charged under, alone and
// per storage class.
var pvcResourceNames = []corev1.ResourceName{
	corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceRequestsStorage,
}

// storageClassInfix joins a storage class and a resource name into the
// name of the resource used by claims of that class.
const storageClassInfix = ".storageclass.storage.k8s.io/"

// ResourceByStorageClass is the quota name of name (persistentvolumeclaims
// or requests.storage) used by claims of storage class class:
// "gold.storageclass.storage.k8s.io/requests.storage".
func ResourceByStorageClass(class string, name corev1.ResourceName) corev1.ResourceName {
	return corev1.ResourceName(class + storageClassInfix + string(name))
}

// pvcEvaluator measures persistent volume claims.
type pvcEvaluator struct {
	list generic.ListFuncByNamespace
}

var _ quotav1.Evaluator = (*pvcEvaluator)(nil)

// NewPersistentVolumeClaimEvaluator is the evaluator of persistent volume
// claims: persistentvolumeclaims and count/persistentvolumeclaims 1 each,
// requests.storage the storage asked for (or allocated, when more), and
// the same per storage class. Its scope is VolumeAttributesClass.
func NewPersistentVolumeClaimEvaluator(f quotav1.ListerForResourceFunc) quotav1.Evaluator {
	return &pvcEvaluator{list: listFunc(f, pvcsResource)}
}

func (e *pvcEvaluator) GroupResource() schema.GroupResource {
	return pvcsResource.GroupResource()
}

// Handles creates and updates, and every update of the status
// subresource. Upstream means to handle only status updates that change
// the allocated storage or the volume attributes classes the claim
// refers to, but compares the allocated storage by the addresses of two
// fresh copies, which always differ; what it does, every status update,
// is what svcnet does (UpdateFilter likewise).
func (e *pvcEvaluator) Handles(a admission.Attributes) bool {
	op := a.GetOperation()
	switch a.GetSubresource() {
	case "":
		return op == admission.Create || op == admission.Update
	case "status":
		_, err1 := asPVC(a.GetObject())
		_, err2 := asPVC(a.GetOldObject())
		return err1 == nil && err2 == nil
	}
	return false
}

func (e *pvcEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error {
	return nil
}

func (e *pvcEvaluator) Matches(q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	return generic.Matches(q, obj, e.MatchingResources, pvcMatchesScope)
}

// MatchingResources are the names of input a claim can be charged under:
// count/persistentvolumeclaims, persistentvolumeclaims, requests.storage
// and their per storage class names.
func (e *pvcEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := []corev1.ResourceName{}
	for _, name := range input {
		if name == pvcCount || quotav1.Contains(pvcResourceNames, name) {
			out = append(out, name)
			continue
		}
		for _, r := range pvcResourceNames {
			if strings.HasSuffix(string(name), storageClassInfix+string(r)) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

func (e *pvcEvaluator) MatchingScopes(obj runtime.Object, selectors []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return matchingScopes(obj, selectors, pvcMatchesScope)
}

func (e *pvcEvaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return uncoveredScopes(limited, matched), nil
}

// Usage of a claim. The storage charged is its request rounded up to a
// whole byte, or what status.allocatedResources holds when that is more
// (an expansion under way, or one that failed and was asked back down);
// a claim without a storage request is charged none.
func (e *pvcEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	pvc, err := asPVC(obj)
	if err != nil {
		return corev1.ResourceList{}, err
	}
	one := *resource.NewQuantity(1, resource.DecimalSI)
	usage := corev1.ResourceList{
		corev1.ResourcePersistentVolumeClaims: one,
		pvcCount:                              one,
	}
	class := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	if class != "" {
		usage[ResourceByStorageClass(class, corev1.ResourcePersistentVolumeClaims)] = one
	}
	if storage, ok := pvcStorage(pvc); ok {
		usage[corev1.ResourceRequestsStorage] = storage
		if class != "" {
			usage[ResourceByStorageClass(class, corev1.ResourceRequestsStorage)] = storage
		}
	}
	return usage, nil
}

func (e *pvcEvaluator) UsageStats(opts quotav1.UsageStatsOptions) (quotav1.UsageStats, error) {
	return generic.CalculateUsageStats(opts, e.list, pvcMatchesScope, e.Usage)
}

func pvcStorage(pvc *corev1.PersistentVolumeClaim) (resource.Quantity, bool) {
	requested, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return resource.Quantity{}, false
	}
	charged := wholeBytes(requested)
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && allocated.Cmp(charged) > 0 {
		charged = wholeBytes(allocated)
	}
	return charged, true
}

// wholeBytes is q rounded up to a whole number, as quota status only
// holds whole bytes.
func wholeBytes(q resource.Quantity) resource.Quantity {
	q = q.DeepCopy()
	q.RoundUp(0)
	return q
}

func asPVC(obj runtime.Object) (*corev1.PersistentVolumeClaim, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || pvc == nil {
		return nil, fmt.Errorf("expect *v1.PersistentVolumeClaim, got %T", obj)
	}
	return pvc, nil
}

// pvcMatchesScope tells whether a claim is in a quota's scope: only
// VolumeAttributesClass, matched against each class the claim refers to
// (asked for, current, or target of a modification in progress).
func pvcMatchesScope(s corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pvc, err := asPVC(obj)
	if err != nil {
		return false, err
	}
	if s.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
		return false, nil
	}
	classes := volumeAttributesClasses(pvc)
	if s.Operator == corev1.ScopeSelectorOpExists {
		return classes.Len() != 0, nil
	}
	if classes.Len() == 0 {
		return selectorMatches(s, labels.Set{})
	}
	for class := range classes {
		ok, err := selectorMatches(s, labels.Set{string(corev1.ResourceQuotaScopeVolumeAttributesClass): class})
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func volumeAttributesClasses(pvc *corev1.PersistentVolumeClaim) sets.Set[string] {
	classes := sets.New[string]()
	if c := pvc.Spec.VolumeAttributesClassName; c != nil && *c != "" {
		classes.Insert(*c)
	}
	if c := pvc.Status.CurrentVolumeAttributesClassName; c != nil && *c != "" {
		classes.Insert(*c)
	}
	if m := pvc.Status.ModifyVolumeStatus; m != nil && m.TargetVolumeAttributesClassName != "" {
		classes.Insert(m.TargetVolumeAttributesClassName)
	}
	return classes
}
