// Package podstate reads a pod's state the way upstream's controllers do
// (k8s.io/kubernetes/pkg/api/v1/pod and pkg/controller): whether it is
// Ready, still active, and available for a workload's minReadySeconds.
package podstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReadyCondition is the pod's Ready condition, nil without one.
func ReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// Ready is the pod's Ready condition.
func Ready(pod *corev1.Pod) bool {
	c := ReadyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// ReadySince is when the pod's Ready condition last changed, zero without
// one.
func ReadySince(pod *corev1.Pod) time.Time {
	if c := ReadyCondition(pod); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// Active says whether the pod still counts towards its owner's replicas:
// not finished (Succeeded or Failed) and not being deleted.
func Active(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
}

// Available says whether the pod has been Ready for minReadySeconds at
// now, as upstream's IsPodAvailable. A Ready pod that is not available yet
// becomes so after wait, which is when its owner should look again.
func Available(pod *corev1.Pod, minReadySeconds int32, now time.Time) (available bool, wait time.Duration) {
	if !Ready(pod) {
		return false, 0
	}
	if minReadySeconds == 0 {
		return true, 0
	}
	at := ReadySince(pod).Add(time.Duration(minReadySeconds) * time.Second)
	if at.Before(now) {
		return true, 0
	}
	return false, at.Sub(now)
}
