package pod

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// ephemeralContainers is pods/ephemeralcontainers, as upstream's
// ephemeral containers strategy: a write changes the pod's
// spec.ephemeralContainers and nothing else (the rest of what it sends is
// the stored pod's again), and may only add containers, never change or
// remove one; a static pod takes none. The pod's generation moves, as for
// any spec change.
func ephemeralContainers() registry.Subresource {
	return registry.Subresource{
		PrepareForUpdate: func(obj, old runtime.Object) {
			pod := obj.(*corev1.Pod)
			added := pod.Spec.EphemeralContainers
			*pod = *old.(*corev1.Pod).DeepCopy()
			pod.Spec.EphemeralContainers = added
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateEphemeralContainersUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
		},
	}
}

func validateEphemeralContainersUpdate(pod, old *corev1.Pod) field.ErrorList {
	errs := validatePod(pod)
	if _, mirror := old.Annotations[mirrorPodAnnotation]; mirror {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	p := field.NewPath("spec", "ephemeralContainers")
	byName := map[string]*corev1.EphemeralContainer{}
	for i := range pod.Spec.EphemeralContainers {
		byName[pod.Spec.EphemeralContainers[i].Name] = &pod.Spec.EphemeralContainers[i]
	}
	// A patch may reorder them: each is compared by name.
	for _, prev := range old.Spec.EphemeralContainers {
		cur, ok := byName[prev.Name]
		switch {
		case !ok:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("existing ephemeral containers %q may not be removed\n", prev.Name)))
		case !apiequality.Semantic.DeepEqual(prev, *cur):
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("existing ephemeral containers %q may not be changed\n%v", prev.Name, cmp.Diff(prev, *cur))))
		}
	}
	return errs
}
