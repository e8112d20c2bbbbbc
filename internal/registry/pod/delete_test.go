package pod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPrepareForDelete(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	cases := []struct {
		name        string
		pod         corev1.Pod
		opts        metav1.DeleteOptions
		wantPending bool
		wantGrace   int64
	}{
		{name: "unbound pod goes at once", pod: corev1.Pod{}},
		{name: "bound pod waits its grace", pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}, wantPending: true, wantGrace: 30},
		{name: "pod's own grace", pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1", TerminationGracePeriodSeconds: i64(5)}}, wantPending: true, wantGrace: 5},
		{name: "grace 0 forces", pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}, opts: metav1.DeleteOptions{GracePeriodSeconds: i64(0)}},
		{name: "finished pod goes at once", pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod.DeepCopy()
			pending, err := strategy{}.PrepareForDelete(pod, &tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if pending != tc.wantPending {
				t.Fatalf("pending = %v, want %v", pending, tc.wantPending)
			}
			if pending && (pod.DeletionTimestamp == nil || *pod.DeletionGracePeriodSeconds != tc.wantGrace) {
				t.Fatalf("deletion marks = %v %v, want grace %d", pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds, tc.wantGrace)
			}
		})
	}
	// A second delete may shorten the grace, not lengthen it.
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}
	if _, err := (strategy{}).PrepareForDelete(pod, &metav1.DeleteOptions{GracePeriodSeconds: i64(10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := (strategy{}).PrepareForDelete(pod, &metav1.DeleteOptions{GracePeriodSeconds: i64(60)}); err != nil {
		t.Fatal(err)
	}
	if *pod.DeletionGracePeriodSeconds != 10 {
		t.Fatalf("grace lengthened to %d", *pod.DeletionGracePeriodSeconds)
	}
}
