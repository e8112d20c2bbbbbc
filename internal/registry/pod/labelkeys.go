package pod

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MergeLabelKeys does what upstream's pod strategy does to a new pod, so
// that the scheduler reads plain selectors: each pod (anti-)affinity term
// gets `key in (value)` for its matchLabelKeys and `key notin (value)` for
// its mismatchLabelKeys (MatchLabelKeysInPodAffinity, GA), and each
// topology spread constraint `key in (value)` for its matchLabelKeys
// (MatchLabelKeysInPodTopologySpreadSelectorMerge, on since 1.34), the
// values from the pod's labels; keys the pod lacks are skipped. A nil
// labelSelector selects nothing and stays nil.
func MergeLabelKeys(pod *corev1.Pod) {
	if a := pod.Spec.Affinity; a != nil {
		for _, t := range podAffinityTerms(a) {
			if t.LabelSelector != nil {
				appendLabelKeys(t.LabelSelector, t.MatchLabelKeys, metav1.LabelSelectorOpIn, pod.Labels)
				appendLabelKeys(t.LabelSelector, t.MismatchLabelKeys, metav1.LabelSelectorOpNotIn, pod.Labels)
			}
		}
	}
	for i := range pod.Spec.TopologySpreadConstraints {
		if c := &pod.Spec.TopologySpreadConstraints[i]; c.LabelSelector != nil {
			appendLabelKeys(c.LabelSelector, c.MatchLabelKeys, metav1.LabelSelectorOpIn, pod.Labels)
		}
	}
}

// podAffinityTerms are the pod's required and preferred affinity and
// anti-affinity terms, to be changed in place.
func podAffinityTerms(a *corev1.Affinity) []*corev1.PodAffinityTerm {
	var out []*corev1.PodAffinityTerm
	add := func(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) {
		for i := range required {
			out = append(out, &required[i])
		}
		for i := range preferred {
			out = append(out, &preferred[i].PodAffinityTerm)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		add(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		add(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return out
}

func appendLabelKeys(sel *metav1.LabelSelector, keys []string, op metav1.LabelSelectorOperator, podLabels map[string]string) {
	for _, key := range keys {
		if value, ok := podLabels[key]; ok {
			sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: []string{value}})
		}
	}
}
