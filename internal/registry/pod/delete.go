package pod

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PrepareForDelete implements graceful termination as upstream: a pod
// bound to a node and still running is marked with a deletionTimestamp
// grace seconds ahead, for its node agent to stop it and then delete it
// with grace 0. Unbound or finished pods, and grace 0, are removed at once.
// A later delete may shorten the grace period, never lengthen it.
func (strategy) PrepareForDelete(obj runtime.Object, opts *metav1.DeleteOptions) (bool, error) {
	pod := obj.(*corev1.Pod)
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	if grace < 0 {
		grace = 1 // upstream turns a negative grace into the minimum of 1s
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || grace == 0 {
		return false, nil
	}
	if cur := pod.DeletionGracePeriodSeconds; pod.DeletionTimestamp != nil && cur != nil && *cur <= grace {
		return true, nil
	}
	at := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second).Truncate(time.Second))
	pod.DeletionTimestamp = &at
	pod.DeletionGracePeriodSeconds = &grace
	return true, nil
}
