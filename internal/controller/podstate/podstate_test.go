package podstate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(phase corev1.PodPhase, ready corev1.ConditionStatus, since time.Time) *corev1.Pod {
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
	if ready != "" {
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(since)},
		}
	}
	return p
}

func TestAvailable(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		minReady int32
		want     bool
		wait     time.Duration
	}{
		{"no condition", pod(corev1.PodPending, "", now), 0, false, 0},
		{"not ready", pod(corev1.PodRunning, corev1.ConditionFalse, now.Add(-time.Hour)), 0, false, 0},
		{"ready, no minReadySeconds", pod(corev1.PodRunning, corev1.ConditionTrue, now), 0, true, 0},
		{"ready for long enough", pod(corev1.PodRunning, corev1.ConditionTrue, now.Add(-11*time.Second)), 10, true, 0},
		{"ready too briefly", pod(corev1.PodRunning, corev1.ConditionTrue, now.Add(-4*time.Second)), 10, false, 6 * time.Second},
	} {
		got, wait := Available(tc.pod, tc.minReady, now)
		if got != tc.want || wait != tc.wait {
			t.Errorf("%s: Available = %v, %v; want %v, %v", tc.name, got, wait, tc.want, tc.wait)
		}
	}
}

func TestActive(t *testing.T) {
	deleting := pod(corev1.PodRunning, corev1.ConditionTrue, time.Time{})
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod(corev1.PodPending, "", time.Time{}), true},
		{pod(corev1.PodRunning, corev1.ConditionTrue, time.Time{}), true},
		{pod(corev1.PodSucceeded, "", time.Time{}), false},
		{pod(corev1.PodFailed, "", time.Time{}), false},
		{deleting, false},
	} {
		if got := Active(tc.pod); got != tc.want {
			t.Errorf("Active(phase %s, deleting %v) = %v", tc.pod.Status.Phase, tc.pod.DeletionTimestamp != nil, got)
		}
	}
}
