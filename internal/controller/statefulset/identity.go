package statefulset

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controller/controllerref"
)

// podName matches "<set>-<ordinal>", the only names a StatefulSet's pods
// have.
var podName = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// parentAndOrdinal splits a pod's name into its set's name and its ordinal;
// the ordinal is -1 for a name of another shape.
func parentAndOrdinal(pod *corev1.Pod) (string, int) {
	m := podName.FindStringSubmatch(pod.Name)
	if m == nil {
		return "", -1
	}
	ord, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return "", -1
	}
	return m[1], int(ord)
}

func ordinalOf(pod *corev1.Pod) int {
	_, ord := parentAndOrdinal(pod)
	return ord
}

// isMemberOf says whether the pod's name makes it one of the set's.
func isMemberOf(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, ord := parentAndOrdinal(pod)
	return ord >= 0 && parent == set.Name
}

// startOrdinal is spec.ordinals.start, the first ordinal of the set.
func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func replicasOf(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// inRange says whether the pod's ordinal is one the set keeps.
func inRange(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	ord := ordinalOf(pod)
	return ord >= startOrdinal(set) && ord < startOrdinal(set)+replicasOf(set)
}

func podNameFor(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// claimName is the name of the claim made from template for the pod of
// ordinal: "<template>-<set>-<ordinal>".
func claimName(set *appsv1.StatefulSet, template *corev1.PersistentVolumeClaim, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template.Name, set.Name, ordinal)
}

// identityMatches says whether the pod carries the name, namespace and
// identity labels of its ordinal.
func identityMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, ord := parentAndOrdinal(pod)
	return ord >= 0 && parent == set.Name && pod.Namespace == set.Namespace &&
		pod.Labels[appsv1.StatefulSetPodNameLabel] == pod.Name &&
		pod.Labels[appsv1.PodIndexLabel] == strconv.Itoa(ord)
}

// updateIdentity gives the pod the name and identity labels of its ordinal.
func updateIdentity(set *appsv1.StatefulSet, pod *corev1.Pod) {
	ord := ordinalOf(pod)
	pod.Name = podNameFor(set, ord)
	pod.Namespace = set.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ord)
}

// storageMatches says whether the pod mounts its own claim of every
// volume claim template.
func storageMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	ord := ordinalOf(pod)
	if ord < 0 {
		return false
	}
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		j := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == t.Name })
		if j < 0 {
			return false
		}
		src := pod.Spec.Volumes[j].PersistentVolumeClaim
		if src == nil || src.ClaimName != claimName(set, t, ord) {
			return false
		}
	}
	return true
}

// claimsFor are the claims the pod needs, one per volume claim template,
// in template order, labelled with the set's selector labels.
func claimsFor(set *appsv1.StatefulSet, pod *corev1.Pod) []*corev1.PersistentVolumeClaim {
	ord := ordinalOf(pod)
	claims := make([]*corev1.PersistentVolumeClaim, 0, len(set.Spec.VolumeClaimTemplates))
	for i := range set.Spec.VolumeClaimTemplates {
		claim := set.Spec.VolumeClaimTemplates[i].DeepCopy()
		claim.Name = claimName(set, &set.Spec.VolumeClaimTemplates[i], ord)
		claim.Namespace = set.Namespace
		if claim.Labels == nil {
			claim.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			maps.Copy(claim.Labels, set.Spec.Selector.MatchLabels)
		}
		claims = append(claims, claim)
	}
	return claims
}

// updateStorage makes the pod mount its claims under the templates' names,
// replacing any volume of the same name and keeping the others.
func updateStorage(set *appsv1.StatefulSet, pod *corev1.Pod) {
	ord := ordinalOf(pod)
	volumes := make([]corev1.Volume, 0, len(pod.Spec.Volumes)+len(set.Spec.VolumeClaimTemplates))
	templates := map[string]bool{}
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		templates[t.Name] = true
		volumes = append(volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(set, t, ord)},
		}})
	}
	for _, v := range pod.Spec.Volumes {
		if !templates[v.Name] {
			volumes = append(volumes, v)
		}
	}
	pod.Spec.Volumes = volumes
}

// newPod is the pod of ordinal as set's template describes it: the
// template's metadata and spec, the set as controller, the identity labels,
// hostname and subdomain, and the claims' volumes.
func newPod(set *appsv1.StatefulSet, ordinal int) *corev1.Pod {
	pod := controllerref.NewPod(set, kind, &set.Spec.Template)
	pod.Name = podNameFor(set, ordinal)
	updateIdentity(set, pod)
	// Hostname and subdomain are set on creation only: they are immutable.
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	updateStorage(set, pod)
	return pod
}

// newVersionedPod is the pod of ordinal at the revision it should be
// created at: below the partition of a rolling update the current
// revision, otherwise the update revision.
func newVersionedPod(currentSet, updateSet *appsv1.StatefulSet, currentRevision, updateRevision string, ordinal int) *corev1.Pod {
	if s := currentSet.Spec.UpdateStrategy; s.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		bound := int(currentSet.Status.CurrentReplicas)
		if s.RollingUpdate != nil && s.RollingUpdate.Partition != nil {
			bound = int(*s.RollingUpdate.Partition)
		}
		if ordinal < startOrdinal(currentSet)+bound {
			pod := newPod(currentSet, ordinal)
			setRevision(pod, currentRevision)
			return pod
		}
	}
	pod := newPod(updateSet, ordinal)
	setRevision(pod, updateRevision)
	return pod
}

func setRevision(pod *corev1.Pod, revision string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetRevisionLabel] = revision
}

// revisionOf is the name of the ControllerRevision the pod was made from.
func revisionOf(pod *corev1.Pod) string {
	return pod.Labels[appsv1.StatefulSetRevisionLabel]
}
