package pod

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry/validate"
)

const deletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// updatableFields is upstream's list in the "pod updates may not change
// fields other than ..." message.
var updatableFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// validatePod checks what a pod must satisfy on every write.
func validatePod(pod *corev1.Pod) field.ErrorList {
	annotations := field.NewPath("metadata", "annotations")
	var errs field.ErrorList
	if value, mirror := pod.Annotations[mirrorPodAnnotation]; mirror && pod.Spec.NodeName == "" {
		errs = append(errs, field.Invalid(annotations.Key(mirrorPodAnnotation), value, "must set spec.nodeName if mirror pod annotation is set"))
	}
	if value, ok := pod.Annotations[deletionCostAnnotation]; ok {
		if _, err := strconv.ParseInt(value, 10, 32); err != nil {
			errs = append(errs, field.Invalid(annotations.Key(deletionCostAnnotation), value, "must be a 32bit integer"))
		}
	}
	return append(errs, validate.PodSpec(&pod.Spec, &pod.ObjectMeta, field.NewPath("spec"))...)
}

func validateCreate(pod *corev1.Pod) field.ErrorList {
	errs := validatePod(pod)
	spec := field.NewPath("spec")
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(spec.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// validateUpdate allows only upstream's mutable pod fields to change.
func validateUpdate(pod, old *corev1.Pod) field.ErrorList {
	errs := validatePod(pod)
	spec := field.NewPath("spec")
	for _, c := range []struct {
		name       string
		list, prev []corev1.Container
	}{{"containers", pod.Spec.Containers, old.Spec.Containers}, {"initContainers", pod.Spec.InitContainers, old.Spec.InitContainers}} {
		if len(c.list) != len(c.prev) {
			return append(errs, field.Forbidden(spec.Child(c.name), "pod updates may not add or remove containers"))
		}
		for i, ctr := range c.list {
			p := spec.Child(c.name).Index(i).Child("image")
			if ctr.Image == "" {
				errs = append(errs, field.Required(p, ""))
			}
			errs = append(errs, validate.ImageWhitespace(ctr.Image, p)...)
		}
	}

	deadline := spec.Child("activeDeadlineSeconds")
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
		if *d < 0 || *d > math.MaxInt32 {
			return append(errs, field.Invalid(deadline, *d, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if prev := old.Spec.ActiveDeadlineSeconds; prev != nil && *prev < *d {
			return append(errs, field.Invalid(deadline, *d, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(deadline, pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}
	errs = append(errs, onlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, spec.Child("tolerations"))...)
	errs = append(errs, onlyRemovedGates(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, spec.Child("schedulingGates"))...)
	if apiequality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		return errs
	}

	// Put the mutable fields back to their old values; what differs then
	// is a forbidden change.
	munged := *pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	if prev := old.Spec.TerminationGracePeriodSeconds; prev != nil && *prev < 0 &&
		munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = prev
	}
	if len(old.Spec.SchedulingGates) > 0 {
		// a gated pod may still gain node selector terms
		munged.NodeSelector = old.Spec.NodeSelector
		if munged.Affinity != nil && old.Spec.Affinity != nil {
			munged.Affinity.NodeAffinity = old.Spec.Affinity.NodeAffinity
		}
	}
	if !apiequality.Semantic.DeepEqual(munged, old.Spec) {
		diff := cmp.Diff(old.Spec, munged)
		errs = append(errs, field.Forbidden(spec, fmt.Sprintf("pod updates may not change fields other than %s\n%v",
			strings.Join(updatableFields, ","), diff)))
	}
	return errs
}

// onlyAddedTolerations lets an update add tolerations and change the
// seconds of existing ones, nothing else.
func onlyAddedTolerations(tolerations, old []corev1.Toleration, p *field.Path) field.ErrorList {
	for _, prev := range old {
		found := false
		for _, t := range tolerations {
			candidate := prev
			candidate.TolerationSeconds = t.TolerationSeconds
			if reflect.DeepEqual(candidate, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(p, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return validate.Tolerations(tolerations, p)
}

// onlyRemovedGates lets an update remove scheduling gates but not add any.
func onlyRemovedGates(gates, old []corev1.PodSchedulingGate, p *field.Path) field.ErrorList {
	was := map[string]bool{}
	for _, g := range old {
		was[g.Name] = true
	}
	var errs field.ErrorList
	for i, g := range gates {
		if !was[g.Name] {
			errs = append(errs, field.Forbidden(p.Index(i).Child("name"),
				fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}
