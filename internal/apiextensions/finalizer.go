package apiextensions

import (
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/internal/registry/customresourcedefinition"
)

// finalize deletes a terminating definition's objects, as upstream's CRD
// finalizer, reporting progress in its Terminating condition, and removes
// the cleanup finalizer once none is left.
func (c *Controllers) finalize(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	if err := c.setTerminating(ctx, crd, "InstanceDeletionInProgress", "CustomResource deletion is in progress"); err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Resource: crd.Status.AcceptedNames.Plural}
	for _, v := range crd.Spec.Versions {
		if v.Served {
			gvr.Version = v.Name
			break
		}
	}
	list, err := c.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return c.setTerminating(ctx, crd, "InstanceDeletionFailed", fmt.Sprintf("could not list instances: %v", err))
	}
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() != nil {
			continue
		}
		err := c.dynamic.Resource(gvr).Namespace(item.GetNamespace()).Delete(ctx, item.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return c.setTerminating(ctx, crd, "InstanceDeletionFailed", fmt.Sprintf("could not issue all deletes: %v", err))
		}
	}
	if len(list.Items) > 0 {
		// Deleted objects with finalizers of their own take longer.
		c.queue.AddAfter(crd.Name, finalizeRetry)
		return nil
	}
	return c.release(ctx, crd, "InstanceDeletionCompleted", "removed all instances")
}

// release says in the Terminating condition why the definition may go, and
// removes the cleanup finalizer.
func (c *Controllers) release(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, reason, message string) error {
	if err := c.setTerminating(ctx, crd, reason, message); err != nil {
		return err
	}
	cur, err := c.client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == customresourcedefinition.CleanupFinalizer })
	_, err = c.client.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// setTerminating writes the Terminating condition unless it says so already.
func (c *Controllers) setTerminating(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, reason, message string) error {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Terminating && cond.Reason == reason && cond.Message == message {
			return nil
		}
	}
	cur, err := c.client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	next := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
		Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
	i := slices.IndexFunc(cur.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool { return c.Type == next.Type })
	if i < 0 {
		cur.Status.Conditions = append(cur.Status.Conditions, next)
	} else {
		cur.Status.Conditions[i] = next
	}
	_, err = c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
