package deployment

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// calculateStatus is the Deployment's status from its ReplicaSets, with
// the Available condition: replicas - maxUnavailable pods available.
func (c *Controller) calculateStatus(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	available := sum(all, availableReplicas)
	status := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sum(all, statusReplicas),
		UpdatedReplicas:     sum([]*appsv1.ReplicaSet{newRS}, statusReplicas),
		ReadyReplicas:       sum(all, readyReplicas),
		AvailableReplicas:   available,
		UnavailableReplicas: max(sum(all, specReplicas)-available, 0),
		TerminatingReplicas: terminatingReplicas(all),
		CollisionCount:      d.Status.CollisionCount,
		Conditions:          slices.Clone(d.Status.Conditions),
	}
	if available >= *d.Spec.Replicas-maxUnavailable(d) {
		setCondition(&status, c.condition(appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable, "Deployment has minimum availability."))
	} else {
		setCondition(&status, c.condition(appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable, "Deployment does not have minimum availability."))
	}
	return status
}

// syncRolloutStatus writes the status of a rollout step: besides the
// counts, the Progressing condition says whether the rollout completed,
// progressed or ran out of its progress deadline, and a ReplicaSet's
// ReplicaFailure condition is carried over.
func (c *Controller) syncRolloutStatus(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	status := c.calculateStatus(d, all, newRS)
	if !hasProgressDeadline(d) {
		removeCondition(&status, appsv1.DeploymentProgressing)
	}
	current := getCondition(d.Status, appsv1.DeploymentProgressing)
	completed := status.Replicas == status.UpdatedReplicas && current != nil && current.Reason == reasonNewRSAvailable
	if hasProgressDeadline(d) && !completed {
		subject := fmt.Sprintf("Deployment %q", d.Name)
		if newRS != nil {
			subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		switch {
		case complete(d, &status):
			setCondition(&status, c.condition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, subject+" has successfully progressed."))
		case progressing(d, &status):
			// Progress renews lastUpdateTime, which the deadline counts
			// from, even though the reason stays the same.
			cond := c.condition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonReplicaSetUpdated, subject+" is progressing.")
			if current != nil {
				if current.Status == corev1.ConditionTrue {
					cond.LastTransitionTime = current.LastTransitionTime
				}
				removeCondition(&status, appsv1.DeploymentProgressing)
			}
			setCondition(&status, cond)
		case c.timedOut(d, &status):
			setCondition(&status, c.condition(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonTimedOut, subject+" has timed out progressing."))
		}
	}
	if failure := replicaFailure(all, newRS); failure != nil {
		setCondition(&status, *failure)
	} else {
		removeCondition(&status, appsv1.DeploymentReplicaFailure)
	}
	if apiequality.Semantic.DeepEqual(d.Status, status) {
		c.requeueStuck(d, status)
		return nil
	}
	d.Status = status
	return c.updateStatus(ctx, d)
}

// complete says whether all replicas run the new template and are
// available, as of the current generation.
func complete(d *appsv1.Deployment, status *appsv1.DeploymentStatus) bool {
	r := *d.Spec.Replicas
	return status.UpdatedReplicas == r && status.Replicas == r && status.AvailableReplicas == r &&
		status.ObservedGeneration >= d.Generation
}

// progressing says whether status shows progress over the stored status:
// more updated, ready or available pods, or fewer old ones.
func progressing(d *appsv1.Deployment, status *appsv1.DeploymentStatus) bool {
	old := d.Status
	return status.UpdatedReplicas > old.UpdatedReplicas ||
		status.Replicas-status.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		status.ReadyReplicas > old.ReadyReplicas ||
		status.AvailableReplicas > old.AvailableReplicas
}

// timedOut says whether progressDeadlineSeconds passed since the last
// progress.
func (c *Controller) timedOut(d *appsv1.Deployment, status *appsv1.DeploymentStatus) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	cond := getCondition(*status, appsv1.DeploymentProgressing)
	switch {
	case cond == nil || cond.Reason == reasonNewRSAvailable:
		return false
	case cond.Reason == reasonTimedOut:
		return true
	}
	deadline := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(c.clock.Now())
}

// requeueStuck looks at a rollout that made no progress again when its
// progress deadline passes, so that the timeout is reported without any
// other change to wake the controller.
func (c *Controller) requeueStuck(d *appsv1.Deployment, status appsv1.DeploymentStatus) {
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cond == nil || complete(d, &status) || cond.Reason == reasonTimedOut {
		return
	}
	after := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(c.clock.Now())
	// A second more absorbs the truncation of condition times to seconds.
	c.requeueAfter(d, max(after, 0)+time.Second)
}

// replicaFailure is the ReplicaFailure condition of the new ReplicaSet,
// or else of any other, as a Deployment condition.
func replicaFailure(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	for _, rs := range append([]*appsv1.ReplicaSet{newRS}, all...) {
		if rs == nil {
			continue
		}
		for _, cond := range rs.Status.Conditions {
			if cond.Type == appsv1.ReplicaSetReplicaFailure {
				return &appsv1.DeploymentCondition{
					Type:               appsv1.DeploymentReplicaFailure,
					Status:             cond.Status,
					LastUpdateTime:     cond.LastTransitionTime,
					LastTransitionTime: cond.LastTransitionTime,
					Reason:             cond.Reason,
					Message:            cond.Message,
				}
			}
		}
	}
	return nil
}

// condition is a new condition stamped with the controller's clock.
func (c *Controller) condition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string) appsv1.DeploymentCondition {
	now := metav1.NewTime(c.clock.Now())
	return appsv1.DeploymentCondition{Type: t, Status: status, LastUpdateTime: now, LastTransitionTime: now, Reason: reason, Message: message}
}

func getCondition(status appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition unless one of the same status and reason
// is there; a condition keeping its status keeps its transition time.
func setCondition(status *appsv1.DeploymentStatus, cond appsv1.DeploymentCondition) {
	current := getCondition(*status, cond.Type)
	if current != nil && current.Status == cond.Status && current.Reason == cond.Reason {
		return
	}
	if current != nil && current.Status == cond.Status {
		cond.LastTransitionTime = current.LastTransitionTime
	}
	removeCondition(status, cond.Type)
	status.Conditions = append(status.Conditions, cond)
}

func removeCondition(status *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	status.Conditions = slices.DeleteFunc(status.Conditions, func(c appsv1.DeploymentCondition) bool { return c.Type == t })
}
