package pod

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCreateMergesLabelKeysIntoSelectors(t *testing.T) {
	app := func() *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	p := created(newPod(func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "web", "pod-template-hash": "abc", "tenant": "t1"}
		p.Spec.Affinity = &corev1.Affinity{
			PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1,
				PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: app(), MatchLabelKeys: []string{"pod-template-hash", "absent"}}}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "kubernetes.io/hostname", LabelSelector: app(), MismatchLabelKeys: []string{"tenant"}},
				{TopologyKey: "kubernetes.io/hostname", MatchLabelKeys: []string{"tenant"}}, // nil selector: stays nil
			}},
		}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: app(), MatchLabelKeys: []string{"pod-template-hash"}}}
	}))
	req := func(key string, op metav1.LabelSelectorOperator, value string) []metav1.LabelSelectorRequirement {
		return []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: []string{value}}}
	}
	a := p.Spec.Affinity
	for _, c := range []struct {
		what string
		got  *metav1.LabelSelector
		want []metav1.LabelSelectorRequirement
	}{
		{"preferred affinity (matchLabelKeys)", a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector, req("pod-template-hash", metav1.LabelSelectorOpIn, "abc")},
		{"required anti-affinity (mismatchLabelKeys)", a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector, req("tenant", metav1.LabelSelectorOpNotIn, "t1")},
		{"topology spread (matchLabelKeys)", p.Spec.TopologySpreadConstraints[0].LabelSelector, req("pod-template-hash", metav1.LabelSelectorOpIn, "abc")},
	} {
		if diff := gocmp.Diff(c.want, c.got.MatchExpressions); diff != "" || c.got.MatchLabels["app"] != "web" {
			t.Errorf("%s: selector %+v (-want +got expressions):\n%s", c.what, c.got, diff)
		}
	}
	if s := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[1].LabelSelector; s != nil {
		t.Errorf("a nil labelSelector became %+v", s)
	}
}
