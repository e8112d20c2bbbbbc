package deployment

import (
	"log/slog"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType && d.Spec.Strategy.RollingUpdate != nil
}

// fenceposts resolves maxSurge (rounded up) and maxUnavailable (rounded
// down) against the Deployment's replicas, as upstream's
// ResolveFenceposts: when both come to zero, one pod may be unavailable,
// since surging might be impossible (a quota, for one).
func fenceposts(d *appsv1.Deployment) (surge, unavailable int32) {
	ru := d.Spec.Strategy.RollingUpdate
	desired := int(*d.Spec.Replicas)
	zero := intstr.FromInt32(0)
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxSurge, zero), desired, true)
	if err != nil {
		slog.Info("invalid maxSurge", "deployment", d.Namespace+"/"+d.Name, "err", err)
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxUnavailable, zero), desired, false)
	if err != nil {
		slog.Info("invalid maxUnavailable", "deployment", d.Namespace+"/"+d.Name, "err", err)
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

// maxSurge is how many pods a rolling update may run beyond replicas.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, _ := fenceposts(d)
	return s
}

// maxUnavailable is how many of replicas a rolling update may leave
// unavailable, at most all of them.
func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || *d.Spec.Replicas == 0 {
		return 0
	}
	_, u := fenceposts(d)
	return min(u, *d.Spec.Replicas)
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

func hasRevisionHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}

// newReplicaSetReplicas is the size the new ReplicaSet may grow to now:
// for a rolling update as far as maxSurge allows over the pods that may
// be running, for Recreate the full count.
func newReplicaSetReplicas(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	if !isRollingUpdate(d) {
		return *d.Spec.Replicas
	}
	current := sum(all, runningReplicas)
	maxTotal := *d.Spec.Replicas + maxSurge(d)
	if current >= maxTotal {
		return replicas(newRS)
	}
	up := min(maxTotal-current, *d.Spec.Replicas-replicas(newRS))
	return replicas(newRS) + up
}
