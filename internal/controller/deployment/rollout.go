package deployment

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rolloutRolling takes one step of a rolling update: grow the new
// ReplicaSet within maxSurge, or else shrink the old ones as far as
// maxUnavailable allows, and once complete trim the history.
func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rss, true)
	if err != nil {
		return err
	}
	all := append(slices.Clone(oldRSs), newRS)
	scaledUp, err := c.reconcileNewReplicaSet(ctx, d, all, newRS)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	scaledDown, err := c.reconcileOldReplicaSets(ctx, d, all, active(oldRSs...), newRS)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	if complete(d, &d.Status) {
		if err := c.cleanupHistory(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, d, all, newRS)
}

// reconcileNewReplicaSet grows the new ReplicaSet as far as maxSurge
// allows, or shrinks it to replicas, and says whether it scaled.
func (c *Controller) reconcileNewReplicaSet(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	want := *d.Spec.Replicas
	if replicas(newRS) < want {
		want = newReplicaSetReplicas(d, all, newRS)
	}
	scaled, _, err := c.scaleAndRecord(ctx, d, newRS, want)
	return scaled, err
}

// reconcileOldReplicaSets shrinks the old ReplicaSets while the available
// pods stay at least replicas - maxUnavailable: first the old pods that
// are not available anyway, then available ones. It says whether it
// scaled.
func (c *Controller) reconcileOldReplicaSets(ctx context.Context, d *appsv1.Deployment, all, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	if sum(oldRSs, specReplicas) == 0 {
		return false, nil
	}
	minAvailable := *d.Spec.Replicas - maxUnavailable(d)
	newUnavailable := replicas(newRS) - keptAvailable(newRS)
	maxScaledDown := sum(all, specReplicas) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	oldRSs, cleaned, err := c.cleanupUnhealthyReplicas(ctx, d, oldRSs, maxScaledDown)
	if err != nil {
		return false, err
	}
	scaledDown, err := c.scaleDownOldForRollingUpdate(ctx, d, append(slices.Clone(oldRSs), newRS), oldRSs)
	if err != nil {
		return false, err
	}
	return cleaned+scaledDown > 0, nil
}

// cleanupUnhealthyReplicas scales old ReplicaSets down by their
// unavailable pods, oldest first, at most maxCleanup in all. Removing them
// costs no availability.
func (c *Controller) cleanupUnhealthyReplicas(ctx context.Context, d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet, maxCleanup int32) ([]*appsv1.ReplicaSet, int32, error) {
	slices.SortFunc(oldRSs, byCreation)
	var total int32
	for i, rs := range oldRSs {
		if total >= maxCleanup {
			break
		}
		unavailable := replicas(rs) - rs.Status.AvailableReplicas
		if replicas(rs) == 0 || unavailable <= 0 {
			continue
		}
		down := min(maxCleanup-total, unavailable)
		_, updated, err := c.scaleAndRecord(ctx, d, rs, replicas(rs)-down)
		if err != nil {
			return nil, 0, err
		}
		total += down
		oldRSs[i] = updated
	}
	return oldRSs, total, nil
}

// scaleDownOldForRollingUpdate scales old ReplicaSets down, oldest first,
// by as many pods as are available beyond replicas - maxUnavailable
// (counting only the available pods each ReplicaSet keeps).
func (c *Controller) scaleDownOldForRollingUpdate(ctx context.Context, d *appsv1.Deployment, all, oldRSs []*appsv1.ReplicaSet) (int32, error) {
	minAvailable := *d.Spec.Replicas - maxUnavailable(d)
	available := sum(all, keptAvailable)
	if available <= minAvailable {
		return 0, nil
	}
	slices.SortFunc(oldRSs, byCreation)
	budget := available - minAvailable
	var total int32
	for _, rs := range oldRSs {
		if total >= budget {
			break
		}
		if replicas(rs) == 0 {
			continue
		}
		down := min(replicas(rs), budget-total)
		if _, _, err := c.scaleAndRecord(ctx, d, rs, replicas(rs)-down); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// rolloutRecreate scales all old ReplicaSets to zero, waits until their
// pods are gone, then creates or scales up the new ReplicaSet.
func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return err
	}
	all := append(slices.Clone(oldRSs), newRS)
	scaledDown := false
	for _, rs := range active(oldRSs...) {
		scaled, _, err := c.scaleAndRecord(ctx, d, rs, 0)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	pods, err := c.podsByReplicaSet(d, rss)
	if err != nil {
		return err
	}
	if oldPodsRunning(newRS, oldRSs, pods) {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	if newRS == nil {
		if newRS, oldRSs, err = c.replicaSetsAndRevision(ctx, d, rss, true); err != nil {
			return err
		}
		all = append(slices.Clone(oldRSs), newRS)
	}
	if _, _, err := c.scaleAndRecord(ctx, d, newRS, *d.Spec.Replicas); err != nil {
		return err
	}
	if complete(d, &d.Status) {
		if err := c.cleanupHistory(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, d, all, newRS)
}

// oldPodsRunning says whether any pod of an old ReplicaSet may still run:
// one counted in their status, or one not yet Succeeded or Failed.
func oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, pods map[types.UID][]*corev1.Pod) bool {
	if sum(oldRSs, statusReplicas) > 0 {
		return true
	}
	for uid, list := range pods {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, pod := range list {
			if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				return true
			}
		}
	}
	return false
}
