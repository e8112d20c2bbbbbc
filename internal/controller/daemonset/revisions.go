package daemonset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controller/history"
)

// currentRevision is the stored revision of the DaemonSet's template (its
// controller-revision-hash label is the pods' hash), created or renumbered
// if need be, with the collision count to record in status.
func (c *Controller) currentRevision(ctx context.Context, ds *appsv1.DaemonSet, revisions []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, int32, error) {
	var collisions int32
	if ds.Status.CollisionCount != nil {
		collisions = *ds.Status.CollisionCount
	}
	data, err := history.TemplatePatch(ds)
	if err != nil {
		return nil, collisions, err
	}
	next := int64(1)
	if n := len(revisions); n > 0 {
		next = revisions[n-1].Revision + 1
	}
	want := history.New(ds, kind, appsv1.DefaultDaemonSetUniqueLabelKey, ds.Spec.Template.Labels, data, next, collisions)
	cur, err := history.Pick(ctx, c.client.AppsV1().ControllerRevisions(ds.Namespace), revisions, want, appsv1.DefaultDaemonSetUniqueLabelKey, &collisions)
	return cur, collisions, err
}

// truncateHistory deletes the oldest revisions no pod runs, beyond
// revisionHistoryLimit.
func (c *Controller) truncateHistory(ctx context.Context, ds *appsv1.DaemonSet, pods []*corev1.Pod, current *appsv1.ControllerRevision, revisions []*appsv1.ControllerRevision) error {
	live := map[string]bool{current.Name: true}
	hashes := map[string]bool{}
	for _, p := range pods {
		hashes[p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] = true
	}
	for _, r := range revisions {
		if hashes[r.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			live[r.Name] = true
		}
	}
	return history.Truncate(ctx, c.client.AppsV1().ControllerRevisions(ds.Namespace), revisions, live, ds.Spec.RevisionHistoryLimit)
}
