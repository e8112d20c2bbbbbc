package replicaset

import (
	"context"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller/podstate"
)

// calculateStatus is the status of a ReplicaSet controlling the active
// and terminating pods, as upstream's: the counts of pods, of pods with
// all the template's labels, Ready and available ones, terminating ones
// (the DeploymentReplicaSetTerminatingReplicas gate is on by default), and
// the ReplicaFailure condition while creating or deleting pods fails.
func calculateStatus(rs *appsv1.ReplicaSet, active, terminating []*corev1.Pod, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	status := *rs.Status.DeepCopy()
	template := labels.SelectorFromSet(rs.Spec.Template.Labels)
	var fullyLabeled, ready, available int32
	for _, p := range active {
		if template.Matches(labels.Set(p.Labels)) {
			fullyLabeled++
		}
		if podstate.Ready(p) {
			ready++
			if ok, _ := podstate.Available(p, rs.Spec.MinReadySeconds, now); ok {
				available++
			}
		}
	}
	status.Replicas = int32(len(active))
	status.FullyLabeledReplicas = fullyLabeled
	status.ReadyReplicas = ready
	status.AvailableReplicas = available
	status.TerminatingReplicas = ptr.To(int32(len(terminating)))

	failure := condition(status.Conditions, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failure == nil:
		reason := ""
		if diff := len(active) - int(ptr.Deref(rs.Spec.Replicas, 1)); diff < 0 {
			reason = reasonFailedCreate
		} else if diff > 0 {
			reason = reasonFailedDelete
		}
		status.Conditions = append(status.Conditions, appsv1.ReplicaSetCondition{
			Type:               appsv1.ReplicaSetReplicaFailure,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	case manageErr == nil && failure != nil:
		status.Conditions = withoutCondition(status.Conditions, appsv1.ReplicaSetReplicaFailure)
	}
	return status
}

func condition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) *appsv1.ReplicaSetCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func withoutCondition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) []appsv1.ReplicaSetCondition {
	var out []appsv1.ReplicaSetCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// updateStatus writes status unless the ReplicaSet already has it for its
// generation. A failed write is tried once more on a fresh read, as
// upstream's; the result is the ReplicaSet as written.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	if rs.Generation == rs.Status.ObservedGeneration && reflect.DeepEqual(rs.Status, status) {
		return rs, nil
	}
	status.ObservedGeneration = rs.Generation
	next := rs.DeepCopy()
	next.Status = status
	updated, err := c.kind.UpdateStatus(ctx, next)
	if err == nil {
		return updated, nil
	}
	fresh, getErr := c.kind.Read(ctx, rs.Namespace, rs.Name)
	if getErr != nil {
		return nil, fmt.Errorf("update status of %s %s/%s: %w (and read it again: %w)", c.kind.GVK.Kind, rs.Namespace, rs.Name, err, getErr)
	}
	fresh.Status = status
	if updated, err = c.kind.UpdateStatus(ctx, fresh); err != nil {
		return nil, fmt.Errorf("update status of %s %s/%s: %w", c.kind.GVK.Kind, rs.Namespace, rs.Name, err)
	}
	return updated, nil
}
