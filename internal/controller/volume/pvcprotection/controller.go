// Package pvcprotection is upstream's PVC protection controller
// (pkg/controller/volume/pvcprotection): every claim carries the
// kubernetes.io/pvc-protection finalizer, and a deleted claim keeps it
// (Terminating) while a scheduled pod that has not finished uses it.
package pvcprotection

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/registry/persistentvolumeclaim"
)

// ControllerName and Alias are upstream's names of the controller.
const (
	ControllerName = "persistentvolumeclaim-protection-controller"
	Alias          = "pvc-protection"
)

// Controller adds and removes the claims' finalizer.
type Controller struct {
	client kubernetes.Interface
	claims corelisters.PersistentVolumeClaimLister
	pods   corelisters.PodLister
	queue  *controller.Queue[string]
	synced []cache.InformerSynced
}

// New creates the controller and registers its informer handlers.
func New(d controller.Deps) (*Controller, error) {
	pvcInf, podInf := d.Informers.Core().V1().PersistentVolumeClaims(), d.Informers.Core().V1().Pods()
	c := &Controller{client: d.Client, claims: pvcInf.Lister(), pods: podInf.Lister()}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "pvcprotection", Sync: c.sync})
	claimChanged := func(obj any) {
		if pvc, ok := informer.Object[*corev1.PersistentVolumeClaim](obj); ok && needsWork(pvc) {
			if key, ok := informer.Key(pvc); ok {
				c.queue.Add(key)
			}
		}
	}
	// A pod that goes (or finishes) may free the claims it used.
	podChanged := func(obj any) {
		pod, ok := informer.Object[*corev1.Pod](obj)
		if !ok {
			return
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				c.queue.Add(pod.Namespace + "/" + v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	synced, err := informer.Register(
		informer.Handler{Informer: pvcInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: claimChanged, UpdateFunc: func(_, cur any) { claimChanged(cur) }}},
		informer.Handler{Informer: podInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: podChanged, UpdateFunc: func(_, cur any) { podChanged(cur) }, DeleteFunc: podChanged}},
	)
	if err != nil {
		return nil, fmt.Errorf("pvc protection controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run keeps the finalizers until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 1, c.synced...) }

// needsWork: a claim without the finalizer, or a deleted claim with it.
func needsWork(pvc *corev1.PersistentVolumeClaim) bool {
	has := slices.Contains(pvc.Finalizers, persistentvolumeclaim.Finalizer)
	return has == (pvc.DeletionTimestamp != nil)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get claim %s: %w", key, err)
	}
	if !needsWork(pvc) {
		return nil
	}
	clone := pvc.DeepCopy()
	if pvc.DeletionTimestamp == nil {
		clone.Finalizers = append(clone.Finalizers, persistentvolumeclaim.Finalizer)
	} else {
		if used, err := c.inUse(ctx, pvc); err != nil || used {
			return err
		}
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == persistentvolumeclaim.Finalizer })
	}
	if _, err := c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, clone, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update finalizers of claim %s: %w", key, err)
	}
	return nil
}

// inUse asks the cache, then (before the finalizer goes) the API server,
// as upstream, whether a pod uses the claim.
func (c *Controller) inUse(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	cached, err := c.pods.Pods(pvc.Namespace).List(labels.Everything())
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(cached, func(p *corev1.Pod) bool { return podUsesClaim(p, pvc.Name) }) {
		return true, nil
	}
	live, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list pods of %s: %w", pvc.Namespace, err)
	}
	for i := range live.Items {
		if podUsesClaim(&live.Items[i], pvc.Name) {
			return true, nil
		}
	}
	return false, nil
}

// podUsesClaim: a scheduled pod that has not finished names the claim
// (the node starts no pod on a claim being deleted, so unscheduled pods
// do not count).
func podUsesClaim(pod *corev1.Pod, claim string) bool {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}
