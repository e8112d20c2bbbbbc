package statefulset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/controller/slowstart"
)

// round is one sync of one set: its pods sorted into the ordinals it keeps
// (replicas, index i is ordinal start+i) and those it removes (condemned,
// highest ordinal first), and the set as of its current and update
// revisions.
type round struct {
	set, currentSet, updateSet *appsv1.StatefulSet
	current, update            *appsv1.ControllerRevision
	replicas, condemned        []*corev1.Pod
	// firstUnhealthy is the lowest-ordinal pod that is not Running and
	// Ready, the only one a monotonic scale down may delete unhealthy.
	firstUnhealthy *corev1.Pod
	monotonic      bool
	now            time.Time
}

func runningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && podstate.Ready(pod)
}

func (r *round) available(pod *corev1.Pod) bool {
	ok, _ := podstate.Available(pod, r.set.Spec.MinReadySeconds, r.now)
	return ok
}

// created says whether the API server has the pod: it sets a phase on
// create, a pod built in this round has none.
func created(pod *corev1.Pod) bool { return pod.Status.Phase != "" }

func terminating(pod *corev1.Pod) bool { return pod.DeletionTimestamp != nil }

func healthy(pod *corev1.Pod) bool { return runningAndReady(pod) && !terminating(pod) }

// updateSet brings the set's pods towards its spec, as upstream's
// UpdateStatefulSet, writes its status and trims its history.
func (c *Controller) updateSet(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, history []*appsv1.ControllerRevision) error {
	current, update, collisions, err := c.pickRevisions(ctx, set, history)
	if err != nil {
		return err
	}
	status, err := c.updatePods(ctx, set, current, update, collisions, pods)
	var statusErr error
	if status != nil {
		statusErr = c.writeStatus(ctx, set, status)
	}
	live := map[string]bool{current.Name: true, update.Name: true}
	for _, pod := range pods {
		live[revisionOf(pod)] = true
	}
	return errors.Join(err, statusErr, c.truncateHistory(ctx, set, live, history))
}

// updatePods creates, fixes and deletes pods: missing ordinals in order,
// scale down from the highest ordinal, then the rolling update. With
// OrderedReady it stops at the first pod that is not Running, Ready and
// available. It returns the status to record, nil when nothing could be
// computed.
func (c *Controller) updatePods(ctx context.Context, set *appsv1.StatefulSet, current, update *appsv1.ControllerRevision, collisions int32, pods []*corev1.Pod) (*appsv1.StatefulSetStatus, error) {
	r := &round{set: set, current: current, update: update, now: c.now(),
		monotonic: set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement}
	var err error
	if r.currentSet, err = applyRevision(set, current); err != nil {
		return nil, err
	}
	if r.updateSet, err = applyRevision(set, update); err != nil {
		return nil, err
	}
	status := &appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    current.Name,
		UpdateRevision:     update.Name,
		CollisionCount:     &collisions,
		Conditions:         set.Status.Conditions,
	}
	r.count(status, pods)

	start := startOrdinal(set)
	r.replicas = make([]*corev1.Pod, replicasOf(set))
	for _, pod := range pods {
		if inRange(set, pod) {
			r.replicas[ordinalOf(pod)-start] = pod
		} else if ordinalOf(pod) >= 0 {
			r.condemned = append(r.condemned, pod)
		}
	}
	for i, pod := range r.replicas {
		if pod == nil {
			r.replicas[i] = newVersionedPod(r.currentSet, r.updateSet, current.Name, update.Name, start+i)
		}
	}
	slices.SortFunc(r.condemned, func(a, b *corev1.Pod) int { return ordinalOf(b) - ordinalOf(a) })
	if i := slices.IndexFunc(r.replicas, func(p *corev1.Pod) bool { return !healthy(p) }); i >= 0 {
		r.firstUnhealthy = r.replicas[i]
	} else {
		for i := len(r.condemned) - 1; i >= 0 && r.firstUnhealthy == nil; i-- {
			if !healthy(r.condemned[i]) {
				r.firstUnhealthy = r.condemned[i]
			}
		}
	}
	if set.DeletionTimestamp != nil {
		return status, nil // a set being deleted only reports
	}
	steps := []struct {
		pods []*corev1.Pod
		fn   func(context.Context, int) (bool, error)
	}{
		{r.replicas, c.processReplica(r)},
		{r.condemned, c.fixCondemnedClaims(r)},
		{r.condemned, c.processCondemned(r)},
	}
	for _, s := range steps {
		if stop, err := r.runForAll(ctx, s.pods, s.fn); stop || err != nil {
			r.count(status, r.replicas, r.condemned)
			return status, err
		}
	}
	r.count(status, r.replicas, r.condemned)
	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return status, nil // pods take the update when someone deletes them
	}
	return status, c.rollingUpdate(ctx, r, status)
}

// count fills the pod counts of status from the given pods.
func (r *round) count(status *appsv1.StatefulSetStatus, lists ...[]*corev1.Pod) {
	status.Replicas, status.ReadyReplicas, status.AvailableReplicas = 0, 0, 0
	status.CurrentReplicas, status.UpdatedReplicas = 0, 0
	for _, pods := range lists {
		for _, pod := range pods {
			if created(pod) {
				status.Replicas++
			}
			if runningAndReady(pod) {
				status.ReadyReplicas++
				if r.available(pod) {
					status.AvailableReplicas++
				}
			}
			if created(pod) && !terminating(pod) {
				if revisionOf(pod) == r.current.Name {
					status.CurrentReplicas++
				}
				if revisionOf(pod) == r.update.Name {
					status.UpdatedReplicas++
				}
			}
		}
	}
}

// runForAll runs fn on each pod: in order, stopping at the first that says
// stop, for OrderedReady; all at once in slow-start batches for Parallel.
func (r *round) runForAll(ctx context.Context, pods []*corev1.Pod, fn func(context.Context, int) (bool, error)) (bool, error) {
	if r.monotonic {
		for i := range pods {
			if stop, err := fn(ctx, i); stop || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	if _, err := slowstart.Run(len(pods), func(i int) error {
		_, err := fn(ctx, i)
		return err
	}); err != nil {
		return true, err
	}
	return false, nil
}

// processReplica handles the pod of one kept ordinal; it says stop when an
// OrderedReady set must not look further this round.
func (c *Controller) processReplica(r *round) func(context.Context, int) (bool, error) {
	return func(ctx context.Context, i int) (bool, error) {
		pod := r.replicas[i]
		if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			// A finished pod is deleted; the next round recreates it.
			if !terminating(pod) {
				if err := c.deletePod(ctx, r.set, pod); err != nil {
					return true, err
				}
			}
			return true, nil
		}
		if !created(pod) {
			if c.claimIsStale(r.set, pod) {
				return true, nil // the old claim is on its way out
			}
			if err := c.createPod(ctx, r.set, pod); err != nil {
				return true, err
			}
			return r.monotonic, nil
		}
		if pod.Status.Phase == corev1.PodPending {
			if err := c.createClaims(ctx, r.set, pod); err != nil {
				return true, err
			}
			if err := c.fixClaimOwners(ctx, r.set, pod); err != nil {
				return true, err
			}
		}
		if r.monotonic && (terminating(pod) || !runningAndReady(pod) || !r.available(pod)) {
			return true, nil
		}
		if identityMatches(r.set, pod) && storageMatches(r.set, pod) && c.claimsMatchPolicy(r.updateSet, pod) {
			return false, nil
		}
		return false, c.updatePod(ctx, r.updateSet, pod.DeepCopy())
	}
}

// fixCondemnedClaims gives the claims of pods about to be removed the
// owners the retention policy wants, before the pods go.
func (c *Controller) fixCondemnedClaims(r *round) func(context.Context, int) (bool, error) {
	return func(ctx context.Context, i int) (bool, error) {
		if err := c.fixClaimOwners(ctx, r.updateSet, r.condemned[i]); err != nil {
			return true, err
		}
		return false, nil
	}
}

// processCondemned deletes one pod beyond the kept ordinals. An
// OrderedReady set deletes one at a time, highest ordinal first, waiting
// for each to be gone, and only while the others are healthy.
func (c *Controller) processCondemned(r *round) func(context.Context, int) (bool, error) {
	return func(ctx context.Context, i int) (bool, error) {
		pod := r.condemned[i]
		if terminating(pod) {
			return r.monotonic, nil
		}
		if r.monotonic && pod != r.firstUnhealthy && (!runningAndReady(pod) || !r.available(pod)) {
			return true, nil
		}
		return true, c.deletePod(ctx, r.set, pod)
	}
}

// rollingUpdate deletes pods not at the update revision, highest ordinal
// first and only at or above the partition, while fewer than maxUnavailable
// kept pods are unhealthy (the MaxUnavailableStatefulSet feature, on by
// default). The next rounds recreate them at the update revision.
func (c *Controller) rollingUpdate(ctx context.Context, r *round, status *appsv1.StatefulSetStatus) error {
	partition, maxUnavailable := 0, 1
	if ru := r.set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.Partition != nil {
			partition = int(*ru.Partition)
		}
		if ru.MaxUnavailable != nil {
			n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, len(r.replicas), false)
			if err != nil {
				return fmt.Errorf("maxUnavailable: %w", err)
			}
			maxUnavailable = max(n, 1)
		}
	}
	unavailable := 0
	for _, pod := range r.replicas {
		if !healthy(pod) {
			unavailable++
		}
	}
	deleted := 0
	for i := len(r.replicas) - 1; i >= partition && deleted < maxUnavailable-unavailable; i-- {
		pod := r.replicas[i]
		if revisionOf(pod) == r.update.Name || terminating(pod) {
			continue
		}
		if err := c.deletePod(ctx, r.set, pod); err != nil {
			return err
		}
		deleted++
		status.CurrentReplicas--
	}
	return nil
}

// writeStatus records status unless the set already shows it. A rolling
// update whose pods are all updated and Ready is complete: the update
// revision becomes the current one.
func (c *Controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) error {
	replicas := int32(replicasOf(set))
	if set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		status.UpdatedReplicas == replicas && status.ReadyReplicas == replicas && status.Replicas == replicas {
		status.CurrentReplicas = status.UpdatedReplicas
		status.CurrentRevision = status.UpdateRevision
	}
	if apiequality.Semantic.DeepEqual(set.Status, *status) {
		return nil
	}
	api := c.client.AppsV1().StatefulSets(set.Namespace)
	next := set.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		next.Status = *status
		_, err := api.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			fresh, getErr := api.Get(ctx, set.Name, metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			if fresh.UID != set.UID {
				return nil // recreated: its own sync reports on it
			}
			next = fresh
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("update status of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	return nil
}
