package pod

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// resize is pods/resize, as upstream's resize strategy: a write changes
// the resources and resize policies of the pod's containers and the
// pod-level resources, nothing else (the rest of what it sends is the
// stored pod's again); the pod's generation moves, and its node applies
// the new cpu and memory in place, as the kubelet does. Only cpu and
// memory may change, none may be removed, the pod keeps its QoS class,
// and a static pod cannot be resized.
func resize() registry.Subresource {
	return registry.Subresource{
		PrepareForUpdate: func(obj, old runtime.Object) {
			pod, prev := obj.(*corev1.Pod), old.(*corev1.Pod)
			containers, ok := resizedContainers(pod.Spec.Containers, prev.Spec.Containers)
			inits, initsOK := resizedContainers(pod.Spec.InitContainers, prev.Spec.InitContainers)
			if !ok || !initsOK {
				// Added, removed, renamed or reordered: validation says so.
				return
			}
			resources, managed := pod.Spec.Resources, pod.ManagedFields
			if resources == nil && prev.Spec.Resources != nil {
				// A client unaware of pod-level resources dropped them.
				resources = prev.Spec.Resources.DeepCopy()
			}
			*pod = *prev.DeepCopy()
			pod.ManagedFields = managed
			pod.Spec.Containers, pod.Spec.InitContainers, pod.Spec.Resources = containers, inits, resources
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateResize(obj.(*corev1.Pod), old.(*corev1.Pod))
		},
	}
}

// resizedContainers are old with the resources and resize policies of
// list, when list has the same containers in the same order.
func resizedContainers(list, old []corev1.Container) ([]corev1.Container, bool) {
	if len(list) != len(old) {
		return nil, false
	}
	out := make([]corev1.Container, len(old))
	for i := range old {
		if list[i].Name != old[i].Name {
			return nil, false
		}
		out[i] = *old[i].DeepCopy()
		out[i].Resources, out[i].ResizePolicy = list[i].Resources, list[i].ResizePolicy
	}
	return out, true
}

func validateResize(pod, old *corev1.Pod) field.ErrorList {
	errs := validatePod(pod)
	root := field.NewPath("")
	if _, mirror := old.Annotations[mirrorPodAnnotation]; mirror {
		return field.ErrorList{field.Forbidden(root, "static pods cannot be resized")}
	}
	if old.Spec.OS != nil && old.Spec.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(root, "windows pods cannot be resized")}
	}
	spec := field.NewPath("spec")
	oldQOS := old.Status.QOSClass
	if oldQOS == "" {
		oldQOS = qosClass(&old.Spec)
	}
	if oldQOS != qosClass(&pod.Spec) {
		errs = append(errs, field.Invalid(spec, pod.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	if !resizeSupported(old) {
		errs = append(errs, field.Forbidden(spec, "Pod running on node without support for resize"))
	}
	munged := pod.Spec.DeepCopy()
	if podLevel(old) || podLevel(pod) {
		errs = append(errs, podLevelResize(pod, old, munged, spec)...)
	}
	if order := resizeOrder(pod, old, spec); len(order) > 0 {
		return append(errs, order...)
	}
	for i := range old.Spec.InitContainers {
		if validate.IsSidecar(&old.Spec.InitContainers[i]) {
			errs = append(errs, noneRemoved(&pod.Spec.InitContainers[i].Resources, &old.Spec.InitContainers[i].Resources,
				spec.Child("initContainers").Index(i).Child("resources"))...)
		}
	}
	for i := range old.Spec.Containers {
		errs = append(errs, noneRemoved(&pod.Spec.Containers[i].Resources, &old.Spec.Containers[i].Resources,
			spec.Child("containers").Index(i).Child("resources"))...)
	}
	for i := range munged.Containers {
		keepCPUMemory(&munged.Containers[i], &old.Spec.Containers[i])
		if !apiequality.Semantic.DeepEqual(munged.Containers[i], old.Spec.Containers[i]) {
			errs = append(errs, field.Forbidden(spec, "only cpu and memory resources are mutable"))
		}
	}
	for i := range munged.InitContainers {
		c, prev := &munged.InitContainers[i], &old.Spec.InitContainers[i]
		if !validate.IsSidecar(c) {
			if !apiequality.Semantic.DeepEqual(*c, *prev) {
				errs = append(errs, field.Forbidden(spec, "resources for non-sidecar init containers are immutable"))
			}
			continue
		}
		keepCPUMemory(c, prev)
		if !apiequality.Semantic.DeepEqual(*c, *prev) {
			errs = append(errs, field.Forbidden(spec.Child("initContainers").Index(i), "only cpu and memory resources for init or sidecar containers are mutable"))
		}
	}
	if len(errs) == 0 && !apiequality.Semantic.DeepEqual(*munged, old.Spec) {
		errs = append(errs, field.Forbidden(spec, "only cpu and memory resources are mutable"))
	}
	return errs
}

// resizeSupported is upstream's check against nodes from before in-place
// resize: the first running container must report its resources.
func resizeSupported(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running != nil {
			return c.Resources != nil
		}
	}
	return true
}

func podLevel(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	return r != nil && len(r.Requests)+len(r.Limits) > 0
}

// podLevelResize checks a change of the pod-level resources and puts
// their cpu and memory back to old's in munged.
func podLevelResize(pod, old *corev1.Pod, munged *corev1.PodSpec, spec *field.Path) field.ErrorList {
	p := spec.Child("resources")
	if old.Spec.Resources != nil && pod.Spec.Resources == nil {
		return field.ErrorList{field.Forbidden(p, "pod-level resources cannot be removed")}
	}
	var errs field.ErrorList
	var oldReqs, oldLims corev1.ResourceList
	if r := old.Spec.Resources; r != nil {
		oldReqs, oldLims = r.Requests, r.Limits
		if removed(pod.Spec.Resources.Requests, r.Requests) {
			errs = append(errs, field.Forbidden(p.Child("requests"), "pod-level resource requests cannot be removed"))
		}
		if removed(pod.Spec.Resources.Limits, r.Limits) {
			errs = append(errs, field.Forbidden(p.Child("limits"), "pod-level resource limits cannot be removed"))
		}
	}
	if r := munged.Resources; r != nil {
		r.Requests, r.Limits = oldCPUMemory(r.Requests, oldReqs), oldCPUMemory(r.Limits, oldLims)
		if old.Spec.Resources == nil && len(r.Requests) == 0 && len(r.Limits) == 0 && len(r.Claims) == 0 {
			munged.Resources = nil
		}
	}
	if !apiequality.Semantic.DeepEqual(munged.Resources, old.Spec.Resources) {
		errs = append(errs, field.Forbidden(spec, "only cpu and memory resources are mutable at pod-level"))
	}
	return errs
}

// resizeOrder refuses added, removed, renamed or reordered containers.
func resizeOrder(pod, old *corev1.Pod, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		name       string
		list, prev []corev1.Container
	}{{"containers", pod.Spec.Containers, old.Spec.Containers}, {"initContainers", pod.Spec.InitContainers, old.Spec.InitContainers}} {
		p := spec.Child(l.name)
		if len(l.list) != len(l.prev) {
			errs = append(errs, field.Forbidden(p, l.name+" may not be added or removed on resize"))
			continue
		}
		for i := range l.prev {
			if l.list[i].Name != l.prev[i].Name {
				errs = append(errs, field.Forbidden(p.Index(i).Child("name"), l.name+" may not be renamed or reordered on resize"))
			}
		}
	}
	return errs
}

// noneRemoved refuses a resize that drops a request or a limit.
func noneRemoved(r, old *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if removed(r.Requests, old.Requests) {
		errs = append(errs, field.Forbidden(p.Child("requests"), "resource requests cannot be removed"))
	}
	if removed(r.Limits, old.Limits) {
		errs = append(errs, field.Forbidden(p.Child("limits"), "resource limits cannot be removed"))
	}
	return errs
}

func removed(list, old corev1.ResourceList) bool {
	for name := range old {
		if _, ok := list[name]; !ok {
			return true
		}
	}
	return false
}

// keepCPUMemory puts c's cpu and memory back to old's: what differs then
// is a change a resize may not make.
func keepCPUMemory(c, old *corev1.Container) {
	c.Resources = corev1.ResourceRequirements{
		Limits:   oldCPUMemory(c.Resources.Limits, old.Resources.Limits),
		Requests: oldCPUMemory(c.Resources.Requests, old.Resources.Requests),
		Claims:   c.Resources.Claims,
	}
}

// oldCPUMemory is list with its cpu and memory as old has them.
func oldCPUMemory(list, old corev1.ResourceList) corev1.ResourceList {
	if list == nil && old == nil {
		return nil
	}
	out := list.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		delete(out, name)
		if q, ok := old[name]; ok {
			out[name] = q
		}
	}
	return out
}
