package statefulset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/svcnet/svcnet/internal/controller/history"
)

// A StatefulSet's history is kept by package history; a revision's name is
// the pod label controller-revision-hash of the pods made from it.

// newRevision is the revision of set's current template, numbered
// revision; it is named but not yet created.
func newRevision(set *appsv1.StatefulSet, revision int64, collisionCount int32) (*appsv1.ControllerRevision, error) {
	data, err := history.TemplatePatch(set)
	if err != nil {
		return nil, err
	}
	return history.New(set, kind, history.HashLabel, set.Spec.Template.Labels, data, revision, collisionCount), nil
}

// applyRevision is set with its template replaced by the revision's.
func applyRevision(set *appsv1.StatefulSet, revision *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	return history.Apply(set, revision, &appsv1.StatefulSet{})
}

// pickRevisions finds the current and update revisions of set among its sorted
// history, creating the update revision or renumbering an older equal one
// (a rollback) when the template changed. It returns the collision count
// to record in status.
func (c *Controller) pickRevisions(ctx context.Context, set *appsv1.StatefulSet, revisions []*appsv1.ControllerRevision) (current, update *appsv1.ControllerRevision, collisions int32, err error) {
	if set.Status.CollisionCount != nil {
		collisions = *set.Status.CollisionCount
	}
	next := int64(1)
	if n := len(revisions); n > 0 {
		next = revisions[n-1].Revision + 1
	}
	want, err := newRevision(set, next, collisions)
	if err != nil {
		return nil, nil, collisions, err
	}
	update, err = history.Pick(ctx, c.client.AppsV1().ControllerRevisions(set.Namespace), revisions, want, history.HashLabel, &collisions)
	if err != nil {
		return nil, nil, collisions, err
	}
	for _, r := range revisions {
		if r.Name == set.Status.CurrentRevision {
			current = r
			break
		}
	}
	if current == nil {
		current = update
	}
	return current, update, collisions, nil
}

// truncateHistory deletes the oldest revisions that no pod, nor the
// current or update revision, uses, until revisionHistoryLimit remain.
func (c *Controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet, live map[string]bool, revisions []*appsv1.ControllerRevision) error {
	return history.Truncate(ctx, c.client.AppsV1().ControllerRevisions(set.Namespace), revisions, live, set.Spec.RevisionHistoryLimit)
}
