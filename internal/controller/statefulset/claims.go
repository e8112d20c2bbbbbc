package statefulset

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The persistentVolumeClaimRetentionPolicy is carried out by the garbage
// collector: a claim to delete with its set has the set as controller, a
// claim to delete when its pod is scaled away has that pod as controller,
// and a retained claim has neither. These functions decide which
// references a claim should carry, as upstream's claim owner logic.

const (
	retain = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	del    = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
)

// retentionPolicy is the set's policy, Retain for what is unset.
func retentionPolicy(set *appsv1.StatefulSet) appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	p := appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retain, WhenScaled: retain}
	if set.Spec.PersistentVolumeClaimRetentionPolicy != nil {
		if w := set.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted; w != "" {
			p.WhenDeleted = w
		}
		if w := set.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled; w != "" {
			p.WhenScaled = w
		}
	}
	return p
}

// refersTo says whether ref names obj by kind and name, whatever its UID.
func refersTo(ref *metav1.OwnerReference, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	return ref.APIVersion == gvk.GroupVersion().String() && ref.Kind == gvk.Kind && ref.Name == obj.GetName()
}

// staleRef says whether the claim refers to an earlier object of obj's
// name (a UID other than obj's, or any UID when obj is not created yet).
func staleRef(claim *corev1.PersistentVolumeClaim, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	for i := range claim.OwnerReferences {
		if refersTo(&claim.OwnerReferences[i], obj, gvk) {
			return claim.OwnerReferences[i].UID != obj.GetUID()
		}
	}
	return false
}

func hasRef(claim *corev1.PersistentVolumeClaim, owner metav1.Object) bool {
	for _, ref := range claim.OwnerReferences {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// foreignController says whether, under a policy that deletes claims,
// another controller than the set or the pod controls the claim; such a
// claim is not given to the set or the pod.
func foreignController(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	if p := retentionPolicy(set); p.WhenDeleted == retain && p.WhenScaled == retain {
		return false
	}
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		switch {
		case refersTo(ref, set, kind):
			if ref.UID != set.UID {
				return true
			}
		case refersTo(ref, pod, podKind):
			if ref.UID != pod.UID {
				return true
			}
		case ref.Controller != nil && *ref.Controller:
			return true
		}
	}
	return false
}

// wantedOwners says whether the claim of the pod should be controlled by
// the set and by the pod under the set's policy.
func wantedOwners(set *appsv1.StatefulSet, pod *corev1.Pod) (bySet, byPod bool) {
	p := retentionPolicy(set)
	scaledDown := !inRange(set, pod)
	bySet = p.WhenDeleted == del && (p.WhenScaled == retain || !scaledDown)
	byPod = p.WhenScaled == del && scaledDown
	return bySet, byPod
}

// claimOwnersMatch says whether the claim's references agree with the
// policy. A claim that refers to earlier objects of the set's or pod's name
// is left alone, for the garbage collector to handle.
func claimOwnersMatch(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	if staleRef(claim, set, kind) || staleRef(claim, pod, podKind) {
		return true
	}
	if foreignController(claim, set, pod) {
		return !hasRef(claim, set) && !hasRef(claim, pod)
	}
	for _, ref := range claim.OwnerReferences {
		if (ref.UID == set.UID || ref.UID == pod.UID) && (ref.Controller == nil || !*ref.Controller) {
			return false // ours, but not as controller
		}
	}
	bySet, byPod := wantedOwners(set, pod)
	return hasRef(claim, set) == bySet && hasRef(claim, pod) == byPod
}

// setClaimOwners rewrites the claim's references to the set and the pod as
// the policy wants them.
func setClaimOwners(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) {
	foreign := foreignController(claim, set, pod)
	refs := make([]metav1.OwnerReference, 0, len(claim.OwnerReferences)+1)
	for _, ref := range claim.OwnerReferences {
		if !refersTo(&ref, set, kind) && !refersTo(&ref, pod, podKind) {
			refs = append(refs, ref)
		}
	}
	if !foreign {
		bySet, byPod := wantedOwners(set, pod)
		if bySet {
			refs = append(refs, *metav1.NewControllerRef(set, kind))
		}
		if byPod {
			refs = append(refs, *metav1.NewControllerRef(pod, podKind))
		}
	}
	claim.OwnerReferences = refs
}
