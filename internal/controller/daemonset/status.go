package daemonset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/svcnet/svcnet/internal/controller/podstate"
)

// status counts as upstream's updateDaemonSetStatus: each node that should
// run a pod counts its oldest pod as scheduled, ready, available and
// updated (any of its pods, while surging); pods on other nodes are
// misscheduled.
func (w *world) status(ds *appsv1.DaemonSet, collisions int32, c *Controller) appsv1.DaemonSetStatus {
	now := c.clock.Now()
	st := appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, Conditions: ds.Status.Conditions}
	if collisions > 0 || ds.Status.CollisionCount != nil {
		st.CollisionCount = &collisions
	}
	for _, s := range w.nodes {
		if !s.run {
			if len(s.pods) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(s.pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		pod := s.pods[0]
		cur, _ := s.split(w)
		if len(cur) > 0 && len(s.pods) > 1 {
			if ok, _ := podstate.Available(cur[0], ds.Spec.MinReadySeconds, now); ok {
				pod = cur[0] // surging: the new pod counts once it is up
			}
		}
		if podstate.Ready(pod) {
			st.NumberReady++
			if ok, _ := podstate.Available(pod, ds.Spec.MinReadySeconds, now); ok {
				st.NumberAvailable++
			}
		}
		if len(cur) > 0 {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = max(st.DesiredNumberScheduled-st.NumberAvailable, 0)
	return st
}

// updateStatus writes the status when it changed, retrying on conflicts
// with a fresh read.
func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, w *world, collisions int32) error {
	want := w.status(ds, collisions, c)
	if equality.Semantic.DeepEqual(ds.Status, want) {
		return nil
	}
	api := c.client.AppsV1().DaemonSets(ds.Namespace)
	cur := ds.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur.Status = want
		_, err := api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if fresh, getErr := api.Get(ctx, ds.Name, metav1.GetOptions{}); getErr == nil {
			cur = fresh
			want.ObservedGeneration = min(want.ObservedGeneration, fresh.Generation)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}
