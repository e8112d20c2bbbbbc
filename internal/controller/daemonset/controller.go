// Package daemonset is the DaemonSet controller, as upstream's
// (pkg/controller/daemon): it runs one pod of each DaemonSet on every node
// the pod template's node selector, required node affinity and tolerations
// (with upstream's default daemon tolerations) allow, pinned to its node
// by a metadata.name node affinity for the scheduler to bind; removes pods
// from nodes they no longer fit; records each template as a
// ControllerRevision (pods carry its controller-revision-hash and the
// pod-template-generation); replaces old pods node by node (RollingUpdate
// with maxUnavailable or maxSurge) or when deleted (OnDelete); and reports
// the counts in status.
package daemonset

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
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
	"github.com/svcnet/svcnet/internal/controller/expectations"
	"github.com/svcnet/svcnet/internal/controller/history"
	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
	nodereg "github.com/svcnet/svcnet/internal/registry/node"
)

// ControllerName is the source of the controller's Events.
const ControllerName = "daemonset-controller"

var kind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-daemonset-syncs.
	Workers int
}

// Controller is the DaemonSet controller.
type Controller struct {
	opts         Options
	client       kubernetes.Interface
	sets         appslisters.DaemonSetLister
	pods         corelisters.PodLister
	nodes        corelisters.NodeLister
	revisions    appslisters.ControllerRevisionLister
	synced       []cache.InformerSynced
	queue        *controller.Queue[string]
	recorder     record.EventRecorder
	podEvents    controllerref.PodEvents[*appsv1.DaemonSet]
	expectations *expectations.Expectations
	clock        clock.PassiveClock
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	apps, core := d.Informers.Apps().V1(), d.Informers.Core().V1()
	c := &Controller{
		opts:         opts,
		client:       d.Client,
		sets:         apps.DaemonSets().Lister(),
		pods:         core.Pods().Lister(),
		nodes:        core.Nodes().Lister(),
		revisions:    apps.ControllerRevisions().Lister(),
		recorder:     events.NewRecorder(ctx, d.Client, ControllerName),
		expectations: expectations.New(clock.RealClock{}),
		clock:        clock.RealClock{},
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "daemonset", Sync: c.sync})
	c.podEvents = controllerref.PodEvents[*appsv1.DaemonSet]{
		Kind:      kind,
		Get:       func(ns, name string) (*appsv1.DaemonSet, error) { return c.sets.DaemonSets(ns).Get(name) },
		Selecting: c.sets.GetPodDaemonSets,
		Enqueue:   func(ds *appsv1.DaemonSet) { c.enqueue(ds) },
	}
	synced, err := informer.Register(
		informer.Handler{Informer: apps.DaemonSets().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, cur any) { c.enqueue(cur) },
			DeleteFunc: c.deleteSet,
		}},
		informer.Handler{Informer: core.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addPod,
			UpdateFunc: c.updatePod,
			DeleteFunc: c.deletePod,
		}},
		informer.Handler{Informer: core.Nodes().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.enqueueAll() },
			UpdateFunc: c.updateNode,
			DeleteFunc: func(any) { c.enqueueAll() },
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("daemonset controller: %w", err)
	}
	// Revisions are read from the cache, without reacting to them.
	c.synced = append(synced, apps.ControllerRevisions().Informer().HasSynced)
	return c, nil
}

// Run syncs DaemonSets until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.queue.Add(key)
	}
}

func (c *Controller) enqueueAll() {
	sets, err := c.sets.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range sets {
		c.enqueue(ds)
	}
}

func (c *Controller) deleteSet(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.expectations.Forget(key)
		c.queue.Add(key)
	}
}

// updateNode wakes every DaemonSet when what decides where daemon pods run
// changed: labels, taints, readiness or schedulability.
func (c *Controller) updateNode(old, cur any) {
	o, n := old.(*corev1.Node), cur.(*corev1.Node)
	if maps.Equal(o.Labels, n.Labels) && fmt.Sprint(o.Spec.Taints) == fmt.Sprint(n.Spec.Taints) &&
		o.Spec.Unschedulable == n.Spec.Unschedulable && nodereg.IsReady(o) == nodereg.IsReady(n) {
		return
	}
	c.enqueueAll()
}

func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		c.deletePod(pod)
		return
	}
	if ds, ok := c.podEvents.Added(pod); ok {
		key := ds.Namespace + "/" + ds.Name
		c.expectations.CreationObserved(key)
		c.queue.Add(key)
	}
}

// updatePod wakes the pod's DaemonSet; a pod that became Ready wakes it
// again once minReadySeconds have passed, when it becomes available.
func (c *Controller) updatePod(old, cur any) {
	oldPod, curPod := old.(*corev1.Pod), cur.(*corev1.Pod)
	if oldPod.ResourceVersion == curPod.ResourceVersion {
		return
	}
	if curPod.DeletionTimestamp != nil {
		c.deletePod(curPod)
		return
	}
	ds, ok := c.podEvents.Updated(oldPod, curPod)
	if ok && !podstate.Ready(oldPod) && podstate.Ready(curPod) && ds.Spec.MinReadySeconds > 0 {
		c.queue.AddAfter(ds.Namespace+"/"+ds.Name, time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := informer.Object[*corev1.Pod](obj)
	if !ok {
		return
	}
	if ds, ok := c.podEvents.Owner(pod); ok {
		key := ds.Namespace + "/" + ds.Name
		c.expectations.DeletionObserved(key, pod.Namespace+"/"+pod.Name)
		c.queue.Add(key)
	}
}

// sync brings one DaemonSet's pods and history in line with its spec and
// the nodes, and records its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	ds, err := c.sets.DaemonSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get daemonset %s: %w", key, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || selector.Empty() {
		slog.Warn("daemonset has an invalid selector", "daemonset", key, "err", err)
		return nil
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	pods, err := c.claimPods(ctx, ds, selector)
	if err != nil {
		return err
	}
	if ds.DeletionTimestamp != nil {
		return nil // the garbage collector deletes its pods
	}
	revisions, err := c.claimRevisions(ctx, ds, selector)
	if err != nil {
		return err
	}
	history.Sort(revisions)
	current, collisions, err := c.currentRevision(ctx, ds, revisions)
	if err != nil {
		return err
	}
	hash := current.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	w := c.world(ds, nodes, pods, hash)
	if ok, wait := c.expectations.Satisfied(key); ok {
		if err := c.manage(ctx, ds, w, hash); err != nil {
			return fmt.Errorf("daemonset %s: %w", key, err)
		}
	} else {
		c.queue.AddAfter(key, wait)
	}
	if err := c.truncateHistory(ctx, ds, pods, current, revisions); err != nil {
		return err
	}
	if err := c.updateStatus(ctx, ds, w, collisions); err != nil {
		return fmt.Errorf("daemonset %s: %w", key, err)
	}
	if wait, ok := w.nextAvailable(ds, c.clock.Now()); ok {
		c.queue.AddAfter(key, wait)
	}
	return nil
}

// owner is the DaemonSet as claimer of objects patched by patch.
func (c *Controller) owner(ds *appsv1.DaemonSet, selector labels.Selector, patch controllerref.Patch) *controllerref.Owner {
	return &controllerref.Owner{
		Object:   ds,
		Kind:     kind,
		Selector: selector,
		Fresh: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		},
		Patch: patch,
	}
}

// claimPods returns the pods the DaemonSet controls or adopts.
func (c *Controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.pods.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	return controllerref.Claim(ctx, c.owner(ds, selector, func(ctx context.Context, ns, name string, data []byte) error {
		_, err := c.client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
		return err
	}), all)
}

// claimRevisions returns the DaemonSet's history.
func (c *Controller) claimRevisions(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	all, err := c.revisions.ControllerRevisions(ds.Namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("list controller revisions: %w", err)
	}
	return controllerref.Claim(ctx, c.owner(ds, selector, func(ctx context.Context, ns, name string, data []byte) error {
		_, err := c.client.AppsV1().ControllerRevisions(ns).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
		return err
	}), all)
}
