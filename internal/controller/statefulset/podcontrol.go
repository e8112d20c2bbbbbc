package statefulset

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The writes of pods and claims, each recorded as an Event on the set with
// upstream's reasons and wording: "create Pod web-0 in StatefulSet web
// successful", "create Claim www-web-0 Pod web-0 in StatefulSet web
// success".

// createPod creates the pod's missing claims, then the pod, then gives the
// claims the owners the retention policy wants. A pod that already exists
// is an error without an Event: the cache was behind.
func (c *Controller) createPod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	if err := c.createClaims(ctx, set, pod); err != nil {
		c.podEvent("create", set, pod, err)
		return err
	}
	created, err := c.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil
	case err != nil:
		c.podEvent("create", set, pod, err)
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	if err := c.fixClaimOwners(ctx, set, created); err != nil {
		c.podEvent("update", set, pod, err)
		return err
	}
	c.podEvent("create", set, pod, nil)
	return nil
}

// updatePod gives an existing pod its identity, its claims' volumes and
// the claim owners of the retention policy, retrying on conflicts with the
// cached pod.
func (c *Controller) updatePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	attempted := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		consistent := true
		if !identityMatches(set, pod) {
			updateIdentity(set, pod)
			consistent = false
		}
		if !storageMatches(set, pod) {
			updateStorage(set, pod)
			consistent = false
			if err := c.createClaims(ctx, set, pod); err != nil {
				return err
			}
		}
		if !c.claimsMatchPolicy(set, pod) {
			if err := c.fixClaimOwners(ctx, set, pod); err != nil {
				return err
			}
		}
		if consistent {
			return nil
		}
		attempted = true
		_, err := c.client.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
		if err != nil {
			if fresh, getErr := c.pods.Pods(pod.Namespace).Get(pod.Name); getErr == nil {
				pod = fresh.DeepCopy()
			}
		}
		return err
	})
	if attempted || err != nil {
		c.podEvent("update", set, pod, err)
	}
	if err != nil {
		return fmt.Errorf("update pod %s: %w", pod.Name, err)
	}
	return nil
}

// deletePod deletes a pod of the set; one already gone is no failure and
// no Event.
func (c *Controller) deletePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	// The UID precondition keeps a sync on a stale cache from deleting the
	// pod's replacement: a pod already replaced is no failure.
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	c.podEvent("delete", set, pod, err)
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	return nil
}

// createClaims creates the claims of the pod that do not exist yet. A
// claim being deleted blocks the pod until it is gone.
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	var errs []error
	for _, claim := range claimsFor(set, pod) {
		existing, err := c.claims.PersistentVolumeClaims(claim.Namespace).Get(claim.Name)
		switch {
		case apierrors.IsNotFound(err):
			_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
			if err != nil {
				errs = append(errs, fmt.Errorf("failed to create PVC %s: %w", claim.Name, err))
			}
			if !apierrors.IsAlreadyExists(err) {
				c.claimEvent(set, pod, claim, err)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to retrieve PVC %s: %w", claim.Name, err))
			c.claimEvent(set, pod, claim, err)
		case existing.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("pvc %s is being deleted", claim.Name))
		}
	}
	return errors.Join(errs...)
}

// claimsMatchPolicy says whether the pod's existing claims have the owners
// the retention policy wants.
func (c *Controller) claimsMatchPolicy(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	for _, want := range claimsFor(set, pod) {
		claim, err := c.claims.PersistentVolumeClaims(want.Namespace).Get(want.Name)
		if err == nil && !claimOwnersMatch(claim, set, pod) {
			return false
		}
	}
	return true
}

// fixClaimOwners updates the pod's existing claims whose owners do not
// follow the retention policy; missing claims are left for a later sync.
func (c *Controller) fixClaimOwners(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	for _, want := range claimsFor(set, pod) {
		claim, err := c.claims.PersistentVolumeClaims(want.Namespace).Get(want.Name)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("get claim %s: %w", want.Name, err)
		case claimOwnersMatch(claim, set, pod):
			continue
		}
		claim = claim.DeepCopy()
		setClaimOwners(claim, set, pod)
		if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update claim %s for the retention policy: %w", claim.Name, err)
		}
	}
	return nil
}

// claimIsStale says whether, with claims deleted on scale down, a claim of
// the pod about to be created still belongs to the pod's predecessor: it
// is about to be deleted, and the new pod must wait for it to go.
func (c *Controller) claimIsStale(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	if retentionPolicy(set).WhenScaled == retain {
		return false
	}
	for _, want := range claimsFor(set, pod) {
		claim, err := c.claims.PersistentVolumeClaims(want.Namespace).Get(want.Name)
		if err == nil && staleRef(claim, pod, podKind) {
			return true
		}
	}
	return false
}

// podEvent records the outcome of a write of a pod of the set.
func (c *Controller) podEvent(verb string, set *appsv1.StatefulSet, pod *corev1.Pod, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "Successful"+title(verb), "%s Pod %s in StatefulSet %s successful", verb, pod.Name, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "Failed"+title(verb), "%s Pod %s in StatefulSet %s failed error: %s", verb, pod.Name, set.Name, err)
}

// claimEvent records the outcome of the creation of a claim of a pod.
func (c *Controller) claimEvent(set *appsv1.StatefulSet, pod *corev1.Pod, claim *corev1.PersistentVolumeClaim, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "SuccessfulCreate", "create Claim %s Pod %s in StatefulSet %s success", claim.Name, pod.Name, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %s", claim.Name, pod.Name, set.Name, err)
}

func title(verb string) string {
	return strings.ToUpper(verb[:1]) + verb[1:]
}
