package pod

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestDefaultTolerationSeconds checks the DefaultTolerationSeconds
// admission step: a pod tolerates not-ready and unreachable nodes for
// 300s unless one of its own tolerations already covers the NoExecute
// taint.
func TestDefaultTolerationSeconds(t *testing.T) {
	notReady300 := "node.kubernetes.io/not-ready:NoExecute:Exists:300"
	unreachable300 := "node.kubernetes.io/unreachable:NoExecute:Exists:300"
	for _, tc := range []struct {
		name string
		own  []corev1.Toleration
		want []string
	}{
		{"none", nil, []string{notReady300, unreachable300}},
		{"own unreachable kept", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}},
			[]string{"node.kubernetes.io/unreachable:NoExecute:Exists:5", notReady300}},
		{"any effect covers NoExecute", []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}},
			[]string{"node.kubernetes.io/not-ready::Exists:forever", unreachable300}},
		{"NoSchedule does not cover", []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			[]string{"node.kubernetes.io/not-ready:NoSchedule:Exists:forever", notReady300, unreachable300}},
		{"empty key covers both", []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			[]string{":NoExecute:Exists:forever"}},
	} {
		p := created(newPod(func(p *corev1.Pod) { p.Spec.Tolerations = tc.own }))
		var got []string
		for _, tol := range p.Spec.Tolerations {
			secs := "forever"
			if tol.TolerationSeconds != nil {
				secs = fmt.Sprint(*tol.TolerationSeconds)
			}
			got = append(got, fmt.Sprintf("%s:%s:%s:%s", tol.Key, tol.Effect, tol.Operator, secs))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: tolerations = %v, want %v", tc.name, got, tc.want)
		}
	}
}
