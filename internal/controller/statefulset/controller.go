// Package statefulset is the StatefulSet controller, as upstream's
// (pkg/controller/statefulset): it gives each set pods with stable names
// <set>-<ordinal>, hostnames and subdomains, and a claim per volume claim
// template; creates them in ordinal order, each once the previous is
// Running and Ready (OrderedReady), or all at once (Parallel); scales down
// from the highest ordinal; records each pod template as a
// ControllerRevision and rolls pods to a new one from the highest ordinal
// down to the partition; and reports the counts and revisions in status.
package statefulset

import (
	"context"
	"fmt"
	"log/slog"
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

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllerref"
	"github.com/svcnet/svcnet/internal/controller/history"
	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is the source of the controller's Events.
const ControllerName = "statefulset-controller"

var (
	kind    = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	podKind = corev1.SchemeGroupVersion.WithKind("Pod")
)

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-statefulset-syncs.
	Workers int
}

// Controller is the StatefulSet controller.
type Controller struct {
	opts      Options
	client    kubernetes.Interface
	sets      appslisters.StatefulSetLister
	pods      corelisters.PodLister
	claims    corelisters.PersistentVolumeClaimLister
	revisions appslisters.ControllerRevisionLister
	synced    []cache.InformerSynced
	queue     *controller.Queue[string]
	recorder  record.EventRecorder
	podEvents controllerref.PodEvents[*appsv1.StatefulSet]
	now       func() time.Time
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	apps, core := d.Informers.Apps().V1(), d.Informers.Core().V1()
	c := &Controller{
		opts:      opts,
		client:    d.Client,
		sets:      apps.StatefulSets().Lister(),
		pods:      core.Pods().Lister(),
		claims:    core.PersistentVolumeClaims().Lister(),
		revisions: apps.ControllerRevisions().Lister(),
		recorder:  events.NewRecorder(ctx, d.Client, ControllerName),
		now:       time.Now,
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "statefulset", Sync: c.sync})
	c.podEvents = controllerref.PodEvents[*appsv1.StatefulSet]{
		Kind:      kind,
		Get:       func(ns, name string) (*appsv1.StatefulSet, error) { return c.sets.StatefulSets(ns).Get(name) },
		Selecting: c.sets.GetPodStatefulSets,
		Enqueue:   func(set *appsv1.StatefulSet) { c.enqueue(set) },
	}
	synced, err := informer.Register(
		informer.Handler{Informer: apps.StatefulSets().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, cur any) { c.enqueue(cur) },
			DeleteFunc: c.enqueue,
		}},
		informer.Handler{Informer: core.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.podAdded,
			UpdateFunc: c.podUpdated,
			DeleteFunc: c.podDeleted,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("statefulset controller: %w", err)
	}
	// Claims and revisions are read from caches, without reacting to them.
	c.synced = append(synced, core.PersistentVolumeClaims().Informer().HasSynced, apps.ControllerRevisions().Informer().HasSynced)
	return c, nil
}

// Run syncs StatefulSets until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.queue.Add(key)
	}
}

// podAdded wakes the pod's set, or the sets that might adopt an orphan.
func (c *Controller) podAdded(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		c.podDeleted(pod)
		return
	}
	if set, ok := c.podEvents.Added(pod); ok {
		c.enqueue(set)
	}
}

// podUpdated wakes the pod's set and the set it had before; an orphan whose
// labels or owner changed wakes the sets that might adopt it. A pod that
// became Ready wakes its set again once minReadySeconds have passed, when
// it becomes available.
func (c *Controller) podUpdated(old, cur any) {
	oldPod, curPod := old.(*corev1.Pod), cur.(*corev1.Pod)
	if oldPod.ResourceVersion == curPod.ResourceVersion {
		return // a resync
	}
	set, ok := c.podEvents.Updated(oldPod, curPod)
	if ok && !podstate.Ready(oldPod) && podstate.Ready(curPod) && set.Spec.MinReadySeconds > 0 {
		// A second more absorbs clock skew, as upstream.
		c.queue.AddAfter(set.Namespace+"/"+set.Name, time.Duration(set.Spec.MinReadySeconds)*time.Second+time.Second)
	}
}

// podDeleted wakes the deleted pod's set.
func (c *Controller) podDeleted(obj any) {
	pod, ok := informer.Object[*corev1.Pod](obj)
	if !ok {
		return
	}
	if set, ok := c.podEvents.Owner(pod); ok {
		c.enqueue(set)
	}
}

// sync brings one set's pods, claims and history in line with its spec
// and records its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	set, err := c.sets.StatefulSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // its pods, claims and revisions go with it (garbage collector)
	}
	if err != nil {
		return fmt.Errorf("get statefulset %s: %w", key, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		slog.Warn("statefulset has an invalid selector", "statefulset", key, "err", err)
		return nil // nothing to retry until the set changes
	}
	revisions, err := c.claimRevisions(ctx, set, selector)
	if err != nil {
		return err
	}
	pods, err := c.claimPods(ctx, set, selector)
	if err != nil {
		return err
	}
	history.Sort(revisions)
	if err := c.updateSet(ctx, set, pods, revisions); err != nil {
		return fmt.Errorf("statefulset %s: %w", key, err)
	}
	if wait, ok := c.nextAvailable(set, pods); ok {
		c.queue.AddAfter(key, wait)
	}
	return nil
}

// owner is the set as claimer of objects patched by patch.
func (c *Controller) owner(set *appsv1.StatefulSet, selector labels.Selector, patch controllerref.Patch) *controllerref.Owner {
	return &controllerref.Owner{
		Object:   set,
		Kind:     kind,
		Selector: selector,
		Fresh: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
		},
		Patch: patch,
	}
}

// claimPods returns the set's pods: those named as its members that it
// controls or adopts.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.pods.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var candidates []*corev1.Pod
	for _, pod := range all {
		if ref := metav1.GetControllerOfNoCopy(pod); isMemberOf(set, pod) && (ref == nil || ref.UID == set.UID) {
			candidates = append(candidates, pod)
		}
	}
	return controllerref.Claim(ctx, c.owner(set, selector, func(ctx context.Context, ns, name string, data []byte) error {
		_, err := c.client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
		return err
	}), candidates)
}

// claimRevisions returns the set's history: the revisions its selector
// matches that it controls or adopts.
func (c *Controller) claimRevisions(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	all, err := c.revisions.ControllerRevisions(set.Namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("list controller revisions: %w", err)
	}
	return controllerref.Claim(ctx, c.owner(set, selector, func(ctx context.Context, ns, name string, data []byte) error {
		_, err := c.client.AppsV1().ControllerRevisions(ns).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
		return err
	}), all)
}

// nextAvailable is when the first Ready pod of a set with minReadySeconds
// becomes available, for its status to count it.
func (c *Controller) nextAvailable(set *appsv1.StatefulSet, pods []*corev1.Pod) (time.Duration, bool) {
	if set.Spec.MinReadySeconds == 0 {
		return 0, false
	}
	var next time.Duration
	found := false
	for _, pod := range pods {
		if ok, wait := podstate.Available(pod, set.Spec.MinReadySeconds, c.now()); !ok && wait > 0 && (!found || wait < next) {
			next, found = wait, true
		}
	}
	return next, found
}
