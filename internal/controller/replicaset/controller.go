// Package replicaset is the ReplicaSet controller, as upstream's
// (pkg/controller/replicaset): it keeps spec.replicas active pods matching
// each ReplicaSet's selector, adopting orphans and releasing pods it no
// longer selects, creating pods from the template in slow-start batches and
// deleting the pods least worth keeping first, and reports the counts in
// the ReplicaSet's status. Writes are remembered as expectations until the
// informer has seen them, so a lagging cache never makes it create or
// delete twice.
package replicaset

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is the source of the controller's Events.
const ControllerName = "replicaset-controller"

// burstReplicas is upstream's BurstReplicas: the most pods one sync
// creates or deletes.
const burstReplicas = 500

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-replicaset-syncs.
	Workers int
}

// Kind is what a Controller manages: ReplicaSets, or another kind seen as
// ReplicaSets, as upstream's replication manager runs this controller
// over ReplicationControllers.
type Kind struct {
	GVK schema.GroupVersionKind
	// ControllerName is the source of the Events; Queue names the queue.
	ControllerName, Queue string
	Informer              cache.SharedIndexInformer
	// AsReplicaSet is an object of the informer as a ReplicaSet.
	AsReplicaSet func(obj any) *appsv1.ReplicaSet
	// Lister reads the informer's cache as ReplicaSets.
	Lister appslisters.ReplicaSetLister
	// Read and UpdateStatus go to the API.
	Read         func(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	UpdateStatus func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// EventObject is the object an Event of rs names: one of the kind.
	EventObject func(rs *appsv1.ReplicaSet) runtime.Object
}

// ReplicaSets is the kind of the ReplicaSet controller.
func ReplicaSets(d controller.Deps) Kind {
	inf := d.Informers.Apps().V1().ReplicaSets()
	return Kind{
		GVK:            appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		ControllerName: ControllerName, Queue: "replicaset",
		Informer:     inf.Informer(),
		AsReplicaSet: func(obj any) *appsv1.ReplicaSet { return obj.(*appsv1.ReplicaSet) },
		Lister:       inf.Lister(),
		Read: func(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
			return d.Client.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		UpdateStatus: func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
			return d.Client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		},
		EventObject: func(rs *appsv1.ReplicaSet) runtime.Object { return rs },
	}
}

// Controller is the ReplicaSet controller.
type Controller struct {
	opts         Options
	kind         Kind
	client       kubernetes.Interface
	replicaSets  appslisters.ReplicaSetLister
	pods         corelisters.PodLister
	synced       []cache.InformerSynced
	queue        *controller.Queue[string]
	recorder     record.EventRecorder
	expectations *expectations.Expectations
	podEvents    controllerref.PodEvents[*appsv1.ReplicaSet]
	clock        clock.PassiveClock
	// burst bounds the creations and deletions of one sync.
	burst int
}

// New creates the ReplicaSet controller and registers its informer
// handlers; its Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	return NewFor(ctx, d, opts, ReplicaSets(d))
}

// NewFor creates the controller of kind.
func NewFor(ctx context.Context, d controller.Deps, opts Options, kind Kind) (*Controller, error) {
	podInformer := d.Informers.Core().V1().Pods()
	c := &Controller{
		opts:         opts,
		kind:         kind,
		client:       d.Client,
		replicaSets:  kind.Lister,
		pods:         podInformer.Lister(),
		recorder:     events.NewRecorder(ctx, d.Client, kind.ControllerName),
		expectations: expectations.New(clock.RealClock{}),
		clock:        clock.RealClock{},
		burst:        burstReplicas,
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: kind.Queue, Sync: c.sync})
	c.podEvents = controllerref.PodEvents[*appsv1.ReplicaSet]{
		Kind:      kind.GVK,
		Get:       func(ns, name string) (*appsv1.ReplicaSet, error) { return c.replicaSets.ReplicaSets(ns).Get(name) },
		Selecting: c.replicaSets.GetPodReplicaSets,
		Enqueue:   func(rs *appsv1.ReplicaSet) { c.enqueue(rs) },
	}
	synced, err := informer.Register(
		informer.Handler{Informer: kind.Informer, Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: c.updateReplicaSet,
			DeleteFunc: c.deleteReplicaSet,
		}},
		informer.Handler{Informer: podInformer.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addPod,
			UpdateFunc: c.updatePod,
			DeleteFunc: c.deletePod,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind.ControllerName, err)
	}
	c.synced = synced
	return c, nil
}

// Run syncs ReplicaSets until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.queue.Add(key)
	}
}

func (c *Controller) updateReplicaSet(old, cur any) {
	oldRS, curRS := c.kind.AsReplicaSet(old), c.kind.AsReplicaSet(cur)
	if oldRS.UID != curRS.UID {
		// Deleted and recreated between two watch events.
		c.deleteReplicaSet(oldRS)
	}
	c.enqueue(curRS)
}

func (c *Controller) deleteReplicaSet(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.expectations.Forget(key)
		c.queue.Add(key)
	}
}

// addPod observes a creation for the pod's controller, or wakes the
// ReplicaSets that might adopt an orphan.
func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already terminating (e.g. after a
		// restart): that is no creation to observe.
		c.deletePod(pod)
		return
	}
	if rs, ok := c.podEvents.Added(pod); ok {
		key := rs.Namespace + "/" + rs.Name
		c.expectations.CreationObserved(key)
		c.queue.Add(key)
	}
}

// updatePod wakes the pod's controller, the controller it had before, and
// for an orphan whose labels changed the ReplicaSets that might adopt it.
// A pod that starts terminating counts as deleted at once, so that its
// replacement need not wait for the kubelet.
func (c *Controller) updatePod(old, cur any) {
	oldPod, curPod := old.(*corev1.Pod), cur.(*corev1.Pod)
	if oldPod.ResourceVersion == curPod.ResourceVersion {
		return // a resync
	}
	if curPod.DeletionTimestamp != nil {
		c.deletePod(curPod)
		if !maps.Equal(oldPod.Labels, curPod.Labels) {
			c.deletePod(oldPod)
		}
		return
	}
	c.podEvents.Updated(oldPod, curPod)
}

// deletePod observes the deletion of a pod for its controller.
func (c *Controller) deletePod(obj any) {
	pod, ok := informer.Object[*corev1.Pod](obj)
	if !ok {
		return
	}
	if rs, ok := c.podEvents.Owner(pod); ok {
		key := rs.Namespace + "/" + rs.Name
		c.expectations.DeletionObserved(key, pod.Namespace+"/"+pod.Name)
		c.queue.Add(key)
	}
}

// sync brings one ReplicaSet's pods to its replicas and writes its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	rs, err := c.replicaSets.ReplicaSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get replicaset %s: %w", key, err)
	}
	mayAct, expiresIn := c.expectations.Satisfied(key)
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return nil // validation forbids it; nothing can be done until the object changes
	}
	all, err := c.pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods of replicaset %s: %w", key, err)
	}
	var active, terminating []*corev1.Pod
	for _, p := range all {
		switch {
		case podstate.Active(p):
			active = append(active, p)
		case p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
			terminating = append(terminating, p)
		}
	}
	owner := &controllerref.Owner{
		Object:   rs,
		Kind:     c.kind.GVK,
		Selector: selector,
		Fresh: func(ctx context.Context) (metav1.Object, error) {
			return c.kind.Read(ctx, namespace, name)
		},
		Patch: func(ctx context.Context, namespace, name string, patch []byte) error {
			_, err := c.client.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	}
	active, err = controllerref.Claim(ctx, owner, active)
	if err != nil {
		return err
	}
	terminating = controlled(rs, selector, terminating)

	var manageErr error
	switch {
	case rs.DeletionTimestamp != nil:
		// The garbage collector deletes its pods.
	case mayAct:
		manageErr = c.manageReplicas(ctx, rs, active)
	default:
		// Writes still unobserved: look again when they are presumed lost.
		c.queue.AddAfter(key, expiresIn)
	}
	now := c.clock.Now()
	updated, err := c.updateStatus(ctx, rs, calculateStatus(rs, active, terminating, manageErr, now))
	if err != nil {
		return err
	}
	if manageErr != nil {
		return manageErr
	}
	if wait, ok := nextAvailable(active, updated.Spec.MinReadySeconds, now); ok {
		c.queue.AddAfter(key, wait)
	}
	return nil
}

// controlled are the pods the ReplicaSet controls and selects.
func controlled(rs *appsv1.ReplicaSet, selector labels.Selector, pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.UID == rs.UID && selector.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// nextAvailable is how long until the first Ready pod that is not yet
// available for minReadySeconds becomes so; ok is false without one.
func nextAvailable(pods []*corev1.Pod, minReadySeconds int32, now time.Time) (wait time.Duration, ok bool) {
	for _, p := range pods {
		if !podstate.Ready(p) {
			continue
		}
		if available, w := podstate.Available(p, minReadySeconds, now); !available && (!ok || w < wait) {
			wait, ok = w, true
		}
	}
	return wait, ok
}
