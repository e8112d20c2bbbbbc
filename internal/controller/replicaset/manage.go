package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller/controllerref"
	"github.com/svcnet/svcnet/internal/controller/slowstart"
)

// Event reasons, as upstream's pod control.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
)

// manageReplicas creates or deletes pods so that active (the pods the
// ReplicaSet controls) number spec.replicas, at most burst of them in one
// sync, as upstream's manageReplicas.
func (c *Controller) manageReplicas(ctx context.Context, rs *appsv1.ReplicaSet, active []*corev1.Pod) error {
	key := rs.Namespace + "/" + rs.Name
	diff := len(active) - int(ptr.Deref(rs.Spec.Replicas, 1))
	switch {
	case diff < 0:
		n := min(-diff, c.burst)
		c.expectations.ExpectCreations(key, n)
		created, err := slowstart.Run(n, func(int) error { return c.createPod(ctx, rs) })
		// Creations never attempted, or failed, will not be observed.
		for range n - created {
			c.expectations.CreationObserved(key)
		}
		return err
	case diff > 0:
		n := min(diff, c.burst)
		victims := podsToDelete(active, c.relatedPods(rs), n, c.clock.Now())
		podKeys := make([]string, len(victims))
		for i, p := range victims {
			podKeys[i] = p.Namespace + "/" + p.Name
		}
		c.expectations.ExpectDeletions(key, podKeys)
		errs := make([]error, len(victims))
		var wg sync.WaitGroup
		for i, p := range victims {
			wg.Go(func() {
				err := c.deletePodOf(ctx, rs, p.Name)
				if err != nil {
					// Not deleted by us: the informer will not report it.
					c.expectations.DeletionObserved(key, podKeys[i])
				}
				if !apierrors.IsNotFound(err) {
					errs[i] = err
				}
			})
		}
		wg.Wait()
		// The errors are likely alike: report the first, as upstream.
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// createPod creates one pod from the ReplicaSet's template and records the
// outcome as an Event. A namespace being deleted is no failure: its
// ReplicaSets go with it.
func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, podFromTemplate(rs, c.kind.GVK), metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			c.recorder.Eventf(c.kind.EventObject(rs), corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		}
		return err
	}
	c.recorder.Eventf(c.kind.EventObject(rs), corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", pod.Name)
	return nil
}

// podFromTemplate is a new pod of the ReplicaSet, as upstream's
// GetPodFromTemplate: the template's labels, annotations, finalizers and
// spec, a name generated from "<replicaset>-", and the ReplicaSet as its
// controller.
func podFromTemplate(rs *appsv1.ReplicaSet, kind schema.GroupVersionKind) *corev1.Pod {
	pod := controllerref.NewPod(rs, kind, &rs.Spec.Template)
	pod.GenerateName = rs.Name + "-"
	if len(validation.NameIsDNSSubdomain(pod.GenerateName, true)) != 0 {
		pod.GenerateName = rs.Name
	}
	return pod
}

// deletePodOf deletes one of the ReplicaSet's pods and records the outcome
// as an Event; a pod already gone is reported as NotFound without one.
func (c *Controller) deletePodOf(ctx context.Context, rs *appsv1.ReplicaSet, name string) error {
	err := c.client.CoreV1().Pods(rs.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return err
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			c.recorder.Eventf(c.kind.EventObject(rs), corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
		}
		return fmt.Errorf("unable to delete pods: %w", err)
	}
	c.recorder.Eventf(c.kind.EventObject(rs), corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", name)
	return nil
}

// relatedPods are the pods of every ReplicaSet with the same controller as
// rs (none for a ReplicaSet without one), as upstream's
// getIndirectlyRelatedPods.
func (c *Controller) relatedPods(rs *appsv1.ReplicaSet) []*corev1.Pod {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil
	}
	siblings, err := c.replicaSets.ReplicaSets(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	seen := map[types.UID]bool{}
	var out []*corev1.Pod
	for _, s := range siblings {
		if r := metav1.GetControllerOfNoCopy(s); r == nil || r.UID != ref.UID {
			continue
		}
		selector, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
		if err != nil {
			continue
		}
		pods, err := c.pods.Pods(s.Namespace).List(selector)
		if err != nil {
			continue
		}
		for _, p := range pods {
			if !seen[p.UID] {
				seen[p.UID] = true
				out = append(out, p)
			}
		}
	}
	return out
}
