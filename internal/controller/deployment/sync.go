package deployment

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The reasons of the Deployment's conditions, as upstream's.
const (
	reasonNewReplicaSet      = "NewReplicaSetCreated"
	reasonFoundNewRS         = "FoundNewReplicaSet"
	reasonNewRSAvailable     = "NewReplicaSetAvailable"
	reasonReplicaSetUpdated  = "ReplicaSetUpdated"
	reasonTimedOut           = "ProgressDeadlineExceeded"
	reasonPaused             = "DeploymentPaused"
	reasonResumed            = "DeploymentResumed"
	reasonFailedRSCreate     = "ReplicaSetCreateError"
	reasonMinimumAvailable   = "MinimumReplicasAvailable"
	reasonMinimumUnavailable = "MinimumReplicasUnavailable"
)

// syncStatusOnly only reports status: what a Deployment being deleted
// gets.
func (c *Controller) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return err
	}
	return c.syncStatus(ctx, d, append(oldRSs, newRS), newRS)
}

// syncScale applies a change of replicas without rolling out, and keeps
// the history of a paused Deployment trimmed.
func (c *Controller) syncScale(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := c.cleanupHistory(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncStatus(ctx, d, append(oldRSs, newRS), newRS)
}

// checkPausedConditions records pausing and resuming in the Progressing
// condition, so that time spent paused never counts against the progress
// deadline.
func (c *Controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == reasonTimedOut {
		return nil
	}
	paused := cond != nil && cond.Reason == reasonPaused
	switch {
	case d.Spec.Paused && !paused:
		setCondition(&d.Status, c.condition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused"))
	case !d.Spec.Paused && paused:
		setCondition(&d.Status, c.condition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonResumed, "Deployment is resumed"))
	default:
		return nil
	}
	return c.updateStatus(ctx, d)
}

// updateStatus writes d's status (and its revision annotation, which
// upstream also writes through the status) and keeps d current.
func (c *Controller) updateStatus(ctx context.Context, d *appsv1.Deployment) error {
	updated, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	*d = *updated
	return nil
}

// replicaSetsAndRevision splits the Deployment's ReplicaSets into the new
// one (created if asked for and missing) and the old ones, and brings the
// revisions of the new ReplicaSet and the Deployment up to date.
func (c *Controller) replicaSetsAndRevision(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	oldRSs := oldReplicaSets(rss, findNewReplicaSet(d, rss))
	newRS, err := c.newReplicaSet(ctx, d, rss, oldRSs, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, oldRSs, nil
}

// newReplicaSet returns the ReplicaSet of the Deployment's template with
// its annotations brought up to date, creating it if asked for; nil if it
// does not exist and is not to be created.
func (c *Controller) newReplicaSet(ctx context.Context, d *appsv1.Deployment, rss, oldRSs []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rss)
	newRevision := maxRevision(oldRSs) + 1
	if existing != nil {
		rs := existing.DeepCopy()
		annotated := setNewReplicaSetAnnotations(d, rs, newRevision, true)
		if annotated || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			updated, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("update replica set %s: %w", rs.Name, err)
			}
			return updated, nil
		}
		changed := setDeploymentRevision(d, rs.Annotations[RevisionAnnotation])
		if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			setCondition(&d.Status, c.condition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonFoundNewRS,
				fmt.Sprintf("Found new replica set %q", rs.Name)))
			changed = true
		}
		if changed {
			if err := c.updateStatus(ctx, d); err != nil {
				return nil, err
			}
		}
		return rs, nil
	}
	if !create {
		return nil, nil
	}

	template := *d.Spec.Template.DeepCopy()
	hash := templateHash(&template, d.Status.CollisionCount)
	template.Labels = withLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, kind)},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        ptr.To[int32](0),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        template,
		},
	}
	newReplicas := newReplicaSetReplicas(d, append(slices.Clone(oldRSs), rs), rs)
	rs.Spec.Replicas = &newReplicas
	setNewReplicaSetAnnotations(d, rs, newRevision, false)

	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	alreadyExisted := apierrors.IsAlreadyExists(err)
	switch {
	case alreadyExisted:
		// A slow cache, or a hash collision: the name is taken by a
		// ReplicaSet of another template or owner.
		found, getErr := c.replicaSets.ReplicaSets(rs.Namespace).Get(rs.Name)
		if getErr != nil {
			return nil, fmt.Errorf("get replica set %s: %w", rs.Name, getErr)
		}
		if ref := metav1.GetControllerOfNoCopy(found); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &found.Spec.Template) {
			created = found
			break
		}
		d.Status.CollisionCount = ptr.To(ptr.Deref(d.Status.CollisionCount, 0) + 1)
		if statusErr := c.updateStatus(ctx, d); statusErr != nil {
			return nil, statusErr
		}
		return nil, fmt.Errorf("hash collision on replica set %s, collisionCount raised to %d: %w", rs.Name, *d.Status.CollisionCount, err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, c.condition(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonFailedRSCreate, msg))
			// The creation error is what matters; a failure to report it
			// is retried with the sync.
			_ = c.updateStatus(ctx, d)
		}
		c.recorder.Event(d, corev1.EventTypeWarning, reasonFailedRSCreate, msg)
		return nil, fmt.Errorf("create replica set %s: %w", rs.Name, err)
	}
	if !alreadyExisted && newReplicas > 0 {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, newReplicas)
	}
	changed := setDeploymentRevision(d, strconv.FormatInt(newRevision, 10))
	if !alreadyExisted && hasProgressDeadline(d) {
		setCondition(&d.Status, c.condition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewReplicaSet,
			fmt.Sprintf("Created new replica set %q", created.Name)))
		changed = true
	}
	if changed {
		if err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// withLabel is a copy of labels with key set to value.
func withLabel(labels map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[key] = value
	return out
}

// setDeploymentRevision sets the Deployment's revision annotation and says
// whether it changed.
func setDeploymentRevision(d *appsv1.Deployment, revision string) bool {
	if d.Annotations[RevisionAnnotation] == revision {
		return false
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[RevisionAnnotation] = revision
	return true
}

// isScalingEvent says whether replicas changed since the active
// ReplicaSets were last sized: such a change is applied by scaling, not by
// a rollout step.
func (c *Controller) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (bool, error) {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return false, err
	}
	for _, rs := range active(append(oldRSs, newRS)...) {
		if desired, ok := intAnnotation(rs, DesiredReplicasAnnotation); ok && desired != *d.Spec.Replicas {
			return true, nil
		}
	}
	return false, nil
}

// scale sizes the ReplicaSets to the Deployment's replicas: a single
// active (or else the newest) ReplicaSet takes them all; old ReplicaSets
// go to zero once the new one is saturated; otherwise, in a rolling
// update, the change is spread over the active ReplicaSets in proportion
// to their sizes, so that a rollout in progress neither speeds up nor
// loses availability.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if rs := activeOrLatest(newRS, oldRSs); rs != nil {
		if replicas(rs) == *d.Spec.Replicas {
			return nil
		}
		_, _, err := c.scaleAndRecord(ctx, d, rs, *d.Spec.Replicas)
		return err
	}
	if isSaturated(d, newRS) {
		for _, old := range active(oldRSs...) {
			if _, _, err := c.scaleAndRecord(ctx, d, old, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	all := active(append(oldRSs, newRS)...)
	var allowed int32
	if *d.Spec.Replicas > 0 {
		allowed = *d.Spec.Replicas + maxSurge(d)
	}
	toAdd := allowed - sum(all, specReplicas)
	switch {
	case toAdd > 0:
		slices.SortFunc(all, bySizeNewer)
	case toAdd < 0:
		slices.SortFunc(all, bySizeOlder)
	}
	sizes := make([]int32, len(all))
	var added int32
	for i, rs := range all {
		sizes[i] = replicas(rs)
		if toAdd != 0 {
			p := proportion(d, rs, toAdd, added)
			sizes[i] += p
			added += p
		}
	}
	if toAdd != 0 && len(all) > 0 {
		// The largest ReplicaSet takes what rounding left over.
		sizes[0] = max(sizes[0]+toAdd-added, 0)
	}
	for i, rs := range all {
		if _, _, err := c.scaleReplicaSet(ctx, d, rs, sizes[i]); err != nil {
			return err
		}
	}
	return nil
}

// activeOrLatest is the only active ReplicaSet, or the newest when none
// is active; nil when several are.
func activeOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	slices.SortFunc(oldRSs, func(a, b *appsv1.ReplicaSet) int { return byCreation(b, a) })
	all := active(append(slices.Clone(oldRSs), newRS)...)
	switch len(all) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return oldRSs[0]
	case 1:
		return all[0]
	}
	return nil
}

// isSaturated says whether the new ReplicaSet runs all of the
// Deployment's replicas, all of them available.
func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := intAnnotation(rs, DesiredReplicasAnnotation)
	return ok && replicas(rs) == *d.Spec.Replicas && desired == *d.Spec.Replicas && rs.Status.AvailableReplicas == *d.Spec.Replicas
}

// proportion is the ReplicaSet's share of toAdd (negative to remove),
// given that added has been handed out already.
func proportion(d *appsv1.Deployment, rs *appsv1.ReplicaSet, toAdd, added int32) int32 {
	if replicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := fraction(d, rs)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

// fraction is how much the ReplicaSet would grow (or shrink) to keep its
// share of the Deployment's maximum size as that size changes.
func fraction(d *appsv1.Deployment, rs *appsv1.ReplicaSet) int32 {
	if *d.Spec.Replicas == 0 {
		return -replicas(rs)
	}
	maxNow := *d.Spec.Replicas + maxSurge(d)
	maxBefore, ok := intAnnotation(rs, MaxReplicasAnnotation)
	if !ok || maxBefore == 0 {
		// Not sized by this controller: assume the current size.
		maxBefore = d.Status.Replicas
	}
	size := float64(replicas(rs)*maxNow) / float64(maxBefore)
	return int32(math.Round(size)) - replicas(rs)
}

// scaleAndRecord scales a ReplicaSet that is not at newScale.
func (c *Controller) scaleAndRecord(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, newScale int32) (bool, *appsv1.ReplicaSet, error) {
	if replicas(rs) == newScale {
		return false, rs, nil
	}
	return c.scaleReplicaSet(ctx, d, rs, newScale)
}

// scaleReplicaSet sets a ReplicaSet's replicas and its record of the
// Deployment's size, with a ScalingReplicaSet event when the size changed.
func (c *Controller) scaleReplicaSet(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, newScale int32) (bool, *appsv1.ReplicaSet, error) {
	desired, maxReplicas := *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d)
	resize := replicas(rs) != newScale
	if !resize && !replicasAnnotationsStale(rs, desired, maxReplicas) {
		return false, rs, nil
	}
	oldScale := replicas(rs)
	next := rs.DeepCopy()
	next.Spec.Replicas = ptr.To(newScale)
	setReplicasAnnotations(next, desired, maxReplicas)
	updated, err := c.client.AppsV1().ReplicaSets(next.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return false, rs, fmt.Errorf("scale replica set %s to %d: %w", rs.Name, newScale, err)
	}
	if resize {
		direction := "up"
		if newScale < oldScale {
			direction = "down"
		}
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", direction, updated.Name, oldScale, newScale)
	}
	return resize, updated, nil
}

// cleanupHistory deletes the oldest old ReplicaSets beyond
// revisionHistoryLimit, only those scaled to zero whose pods are gone.
func (c *Controller) cleanupHistory(ctx context.Context, d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) error {
	if !hasRevisionHistoryLimit(d) {
		return nil
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	excess := len(alive) - int(*d.Spec.RevisionHistoryLimit)
	if excess <= 0 {
		return nil
	}
	slices.SortFunc(alive, byRevision)
	for _, rs := range alive[:excess] {
		if rs.Status.Replicas != 0 || replicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete old replica set %s: %w", rs.Name, err)
		}
	}
	return nil
}

// syncStatus writes the status computed from the ReplicaSets, if it
// changed.
func (c *Controller) syncStatus(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	status := c.calculateStatus(d, all, newRS)
	if apiequality.Semantic.DeepEqual(d.Status, status) {
		return nil
	}
	d.Status = status
	return c.updateStatus(ctx, d)
}
