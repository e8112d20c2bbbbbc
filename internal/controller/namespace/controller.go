// Package namespace is the namespace controller, as upstream's: when a
// namespace is deleted (it turns Terminating and keeps the "kubernetes"
// finalizer in spec.finalizers), it deletes every namespaced object in it,
// kind by kind, reports progress in the namespace's status conditions,
// waits for graceful pod termination and for finalizers, and finally
// removes its finalizer through the finalize subresource, upon which the
// API server removes the namespace.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/internal/controller"
)

// deletionDelay lets other API servers observe the deletion, and late
// creations land, before the content is listed, as upstream. Tests
// shorten it.
var deletionDelay = 5 * time.Second

// finalizerEstimate is how many seconds objects with finalizers are
// expected to take.
const finalizerEstimate = 15

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-namespace-syncs.
	Workers int
	// SyncPeriod is --namespace-sync-period: terminating namespaces are
	// looked at again this often.
	SyncPeriod time.Duration
}

// Controller is the namespace controller.
type Controller struct {
	opts      Options
	client    kubernetes.Interface
	meta      metadata.Interface
	discovery discovery.DiscoveryInterface
	synced    []cache.InformerSynced
	queue     *controller.Queue[string]
}

// New creates the controller and registers its informer handler.
func New(d controller.Deps, metaClient metadata.Interface, disco discovery.DiscoveryInterface, opts Options) (*Controller, error) {
	inf := d.Informers.Core().V1().Namespaces()
	c := &Controller{opts: opts, client: d.Client, meta: metaClient, discovery: disco}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{
		Name:        "namespace",
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 60*time.Second),
		// A namespace is never given up on.
		MaxRetries: int(^uint(0) >> 1),
		Sync:       c.sync,
	})
	queue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.AddAfter(ns.Name, deletionDelay)
		}
	}
	// The resync brings every terminating namespace back each period.
	reg, err := inf.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    queue,
		UpdateFunc: func(_, cur any) { queue(cur) },
	}, opts.SyncPeriod)
	if err != nil {
		return nil, fmt.Errorf("namespace controller: add event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{reg.HasSynced}
	return c, nil
}

// Run empties terminating namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

// sync empties one terminating namespace and then finalizes it.
func (c *Controller) sync(ctx context.Context, name string) error {
	api := c.client.CoreV1().Namespaces()
	ns, err := api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		ns.Status.Phase = corev1.NamespaceTerminating
		if ns, err = api.UpdateStatus(ctx, ns, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("mark namespace %s terminating: %w", name, err)
		}
	}
	estimate, err := c.deleteContent(ctx, ns)
	if err != nil {
		return err
	}
	if estimate > 0 {
		slog.Debug("namespace content remains", "namespace", name, "estimate", estimate)
		c.queue.AddAfter(name, time.Duration(estimate/2+1)*time.Second)
		return nil
	}
	return c.finalize(ctx, name)
}

// finalize removes the controller's finalizer from spec.finalizers.
func (c *Controller) finalize(ctx context.Context, name string) error {
	api := c.client.CoreV1().Namespaces()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		ns, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		_, err = api.Finalize(ctx, ns, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	slog.Info("namespace emptied and finalized", "namespace", name)
	return nil
}

// deleteContent deletes everything in the namespace, records how it went
// in the namespace's conditions, and returns how many seconds the remaining
// objects are expected to take.
func (c *Controller) deleteContent(ctx context.Context, ns *corev1.Namespace) (int64, error) {
	var report conditions
	lists, err := discovery.ServerPreferredNamespacedResources(c.discovery)
	if err != nil {
		var partial *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &partial) {
			return 0, fmt.Errorf("discover namespaced resources: %w", err)
		}
		report.discoveryFailed(err)
	}
	remaining := map[schema.GroupResource]int{}
	finalizers := map[string]int{}
	var estimate int64
	var errs []error
	deleteAll := func(gvr schema.GroupVersionResource, verbs []string) {
		left, err := c.deleteAll(ctx, ns.Name, gvr, verbs)
		if err != nil {
			errs = append(errs, err)
			report.deleteFailed(err)
			return
		}
		estimate = max(estimate, left.estimate)
		if left.count > 0 {
			remaining[gvr.GroupResource()] = left.count
		}
		for f, n := range left.finalizers {
			finalizers[f] += n
		}
	}
	// As upstream's OrderedNamespaceDeletion: the pods go first, and
	// nothing else goes while some remain (a terminating pod may still
	// use its ConfigMaps, Secrets and claims).
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	for _, list := range lists {
		if list.GroupVersion != podsGVR.GroupVersion().String() {
			continue
		}
		for _, r := range list.APIResources {
			if r.Name == podsGVR.Resource && slices.Contains(r.Verbs, "delete") {
				deleteAll(podsGVR, r.Verbs)
			}
		}
	}
	if remaining[podsGVR.GroupResource()] == 0 {
		for _, list := range lists {
			gv, err := schema.ParseGroupVersion(list.GroupVersion)
			if err != nil {
				report.groupVersionFailed(err)
				continue
			}
			for _, r := range list.APIResources {
				if gvr := gv.WithResource(r.Name); slices.Contains(r.Verbs, "delete") && gvr != podsGVR {
					deleteAll(gvr, r.Verbs)
				}
			}
		}
	}
	report.remaining(remaining, finalizers)
	if report.apply(&ns.Status) {
		if _, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("update namespace %s conditions: %w", ns.Name, err))
		}
	}
	return estimate, errors.Join(errs...)
}

// leftover is what remains of one resource after its deletion.
type leftover struct {
	count      int
	finalizers map[string]int
	estimate   int64
}

// deleteAll deletes every object of one resource in the namespace (with
// deletecollection when the resource has it) and reports what remains.
// Remaining objects are expected when pods terminate gracefully or objects
// carry finalizers; otherwise their presence is an error, retried.
func (c *Controller) deleteAll(ctx context.Context, namespace string, gvr schema.GroupVersionResource, verbs []string) (leftover, error) {
	var left leftover
	if gvr.Group == "" && gvr.Resource == "pods" {
		pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return left, fmt.Errorf("list pods in %s: %w", namespace, err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.Spec.TerminationGracePeriodSeconds != nil {
				left.estimate = max(left.estimate, *p.Spec.TerminationGracePeriodSeconds)
			}
		}
	}
	api := c.meta.Resource(gvr).Namespace(namespace)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	if slices.Contains(verbs, "deletecollection") {
		if err := api.DeleteCollection(ctx, opts, metav1.ListOptions{}); err != nil {
			return left, fmt.Errorf("delete collection %s in %s: %w", gvr.GroupResource(), namespace, err)
		}
	} else {
		items, err := api.List(ctx, metav1.ListOptions{})
		if err != nil {
			return left, fmt.Errorf("list %s in %s: %w", gvr.GroupResource(), namespace, err)
		}
		for _, item := range items.Items {
			if err := api.Delete(ctx, item.Name, opts); err != nil && !apierrors.IsNotFound(err) {
				return left, fmt.Errorf("delete %s %s/%s: %w", gvr.GroupResource(), namespace, item.Name, err)
			}
		}
	}
	items, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		return left, fmt.Errorf("list %s in %s: %w", gvr.GroupResource(), namespace, err)
	}
	left.count = len(items.Items)
	if left.count == 0 {
		return leftover{}, nil
	}
	left.finalizers = map[string]int{}
	for _, item := range items.Items {
		for _, f := range item.Finalizers {
			left.finalizers[f]++
		}
	}
	switch {
	case left.estimate > 0:
	case len(left.finalizers) > 0:
		left.estimate = finalizerEstimate
	default:
		return left, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", namespace, gvr)
	}
	return left, nil
}
