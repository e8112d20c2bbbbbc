// Package deployment is the Deployment controller, as upstream's
// (pkg/controller/deployment): it owns one ReplicaSet per pod template,
// named after the template's hash, and moves pods from the old templates to
// the new one by the Deployment's strategy (a rolling update within
// maxSurge and maxUnavailable, or Recreate), scales proportionally when
// replicas change mid-rollout, keeps revisionHistoryLimit old ReplicaSets
// for `kubectl rollout undo`, and reports progress in the Deployment's
// status and conditions.
package deployment

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllerref"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is the source of the controller's Events.
const ControllerName = "deployment-controller"

var (
	kind   = appsv1.SchemeGroupVersion.WithKind("Deployment")
	rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
)

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-deployment-syncs.
	Workers int
}

// Controller is the Deployment controller.
type Controller struct {
	opts        Options
	client      kubernetes.Interface
	deployments appslisters.DeploymentLister
	replicaSets appslisters.ReplicaSetLister
	pods        corelisters.PodLister
	synced      []cache.InformerSynced
	queue       *controller.Queue[string]
	recorder    record.EventRecorder
	clock       clock.PassiveClock
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	apps := d.Informers.Apps().V1()
	pods := d.Informers.Core().V1().Pods()
	c := &Controller{
		opts:        opts,
		client:      d.Client,
		deployments: apps.Deployments().Lister(),
		replicaSets: apps.ReplicaSets().Lister(),
		pods:        pods.Lister(),
		recorder:    events.NewRecorder(ctx, d.Client, ControllerName),
		clock:       clock.RealClock{},
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "deployment", Sync: c.sync})
	queue := func(obj any) {
		if key, ok := informer.Key(obj); ok {
			c.queue.Add(key)
		}
	}
	synced, err := informer.Register(
		informer.Handler{Informer: apps.Deployments().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    queue,
			UpdateFunc: func(_, cur any) { queue(cur) },
			DeleteFunc: queue,
		}},
		informer.Handler{Informer: apps.ReplicaSets().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addReplicaSet,
			UpdateFunc: c.updateReplicaSet,
			DeleteFunc: c.deleteReplicaSet,
		}},
		informer.Handler{Informer: pods.Informer(), Handler: cache.ResourceEventHandlerFuncs{DeleteFunc: c.deletePod}},
	)
	if err != nil {
		return nil, fmt.Errorf("deployment controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run syncs Deployments until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

func (c *Controller) enqueue(d *appsv1.Deployment) {
	c.queue.Add(d.Namespace + "/" + d.Name)
}

// owner is the Deployment a controller reference names, nil if it names
// none that exists now.
func (c *Controller) owner(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	return controllerref.Resolve(ref, kind, c.deployments.Deployments(namespace).Get)
}

// selecting are the Deployments whose selector matches an orphaned
// ReplicaSet: one of them may adopt it.
func (c *Controller) selecting(rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	all, err := c.deployments.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.Deployment
	for _, d := range all {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		out = append(out, d)
	}
	return out
}

func (c *Controller) addReplicaSet(obj any) {
	rs, ok := informer.Object[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	if rs.DeletionTimestamp != nil {
		c.deleteReplicaSet(rs)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.owner(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.selecting(rs) {
		c.enqueue(d)
	}
}

func (c *Controller) updateReplicaSet(old, cur any) {
	oldRS, ok1 := old.(*appsv1.ReplicaSet)
	curRS, ok2 := cur.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 {
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(curRS), metav1.GetControllerOfNoCopy(oldRS)
	refChanged := (curRef == nil) != (oldRef == nil) || (curRef != nil && curRef.UID != oldRef.UID)
	if refChanged && oldRef != nil {
		if d := c.owner(oldRS.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	if curRef != nil {
		if d := c.owner(curRS.Namespace, curRef); d != nil {
			c.enqueue(d)
		}
		return
	}
	if refChanged || !labels.Equals(curRS.Labels, oldRS.Labels) {
		for _, d := range c.selecting(curRS) {
			c.enqueue(d)
		}
	}
}

func (c *Controller) deleteReplicaSet(obj any) {
	rs, ok := informer.Object[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	if d := c.owner(rs.Namespace, metav1.GetControllerOfNoCopy(rs)); d != nil {
		c.enqueue(d)
	}
}

// deletePod wakes a Recreate Deployment, which waits for its old pods to
// be gone before it scales up the new ReplicaSet.
func (c *Controller) deletePod(obj any) {
	pod, ok := informer.Object[*corev1.Pod](obj)
	if !ok {
		return
	}
	rs := controllerref.Resolve(metav1.GetControllerOfNoCopy(pod), rsKind, c.replicaSets.ReplicaSets(pod.Namespace).Get)
	if rs == nil {
		return
	}
	if d := c.owner(rs.Namespace, metav1.GetControllerOfNoCopy(rs)); d != nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}

// sync brings one Deployment's ReplicaSets and status in line.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	cached, err := c.deployments.Deployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get deployment %s: %w", key, err)
	}
	d := cached.DeepCopy()
	if err := c.syncDeployment(ctx, d); err != nil {
		return fmt.Errorf("deployment %s: %w", key, err)
	}
	return nil
}

func (c *Controller) syncDeployment(ctx context.Context, d *appsv1.Deployment) error {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return fmt.Errorf("selector: %w", err)
	}
	if selector.Empty() {
		c.recorder.Eventf(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
			return err
		}
		return nil
	}
	rss, err := c.claimReplicaSets(ctx, d, selector)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rss)
	}
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.syncScale(ctx, d, rss)
	}
	scaling, err := c.isScalingEvent(ctx, d, rss)
	if err != nil {
		return err
	}
	if scaling {
		return c.syncScale(ctx, d, rss)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return c.rolloutRecreate(ctx, d, rss)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, rss)
	}
	return fmt.Errorf("unexpected deployment strategy type: %s", d.Spec.Strategy.Type)
}

// claimReplicaSets returns the ReplicaSets the Deployment controls once
// orphans it selects are adopted and those it no longer selects are
// released.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment, selector labels.Selector) ([]*appsv1.ReplicaSet, error) {
	all, err := c.replicaSets.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list replica sets: %w", err)
	}
	api := c.client.AppsV1()
	owner := &controllerref.Owner{
		Object:   d,
		Kind:     kind,
		Selector: selector,
		Fresh: func(ctx context.Context) (metav1.Object, error) {
			return api.Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		},
		Patch: func(ctx context.Context, namespace, name string, patch []byte) error {
			_, err := api.ReplicaSets(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	}
	return controllerref.Claim(ctx, owner, all)
}

// podsByReplicaSet groups the pods the Deployment selects by the
// ReplicaSet that controls them.
func (c *Controller) podsByReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (map[types.UID][]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	pods, err := c.pods.Pods(d.Namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	byRS := make(map[types.UID][]*corev1.Pod, len(rss))
	for _, rs := range rss {
		byRS[rs.UID] = nil
	}
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			continue
		}
		if _, ok := byRS[ref.UID]; ok {
			byRS[ref.UID] = append(byRS[ref.UID], pod)
		}
	}
	return byRS, nil
}

// requeueAfter looks at a Deployment again after d.
func (c *Controller) requeueAfter(d *appsv1.Deployment, after time.Duration) {
	c.queue.AddAfter(d.Namespace+"/"+d.Name, after)
}
