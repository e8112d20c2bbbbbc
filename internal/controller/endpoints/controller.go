// Package endpoints is the Endpoints controller, as upstream's: it keeps a
// v1 Endpoints object, named as its Service, for every Service with a
// selector — the legacy API that many tools still read. Ready pods are
// listed in addresses, others in notReadyAddresses, and an object over
// 1,000 addresses is truncated and annotated as such.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/endpointutil"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

const (
	// ControllerName is the value of LabelManagedBy on the Endpoints this
	// controller writes, and the source of its Events.
	ControllerName = "endpoint-controller"
	// LabelManagedBy marks Endpoints written by this controller.
	LabelManagedBy = "endpoints.kubernetes.io/managed-by"
)

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-endpoint-syncs.
	Workers int
	// BatchPeriod is --endpoint-updates-batch-period.
	BatchPeriod time.Duration
}

// Controller is the Endpoints controller.
type Controller struct {
	opts      Options
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	synced    []cache.InformerSynced
	queue     *controller.Queue[string]
	latency   *controller.ChangeLatency[string]
	triggers  *endpointutil.TriggerTimes
	recorder  record.EventRecorder
	// replaced holds, per Endpoints, the resourceVersion this controller
	// last overwrote: seeing it again in the cache means the cache is
	// behind.
	replacedMu sync.Mutex
	replaced   map[types.NamespacedName]string
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	core := d.Informers.Core().V1()
	c := &Controller{
		opts:      opts,
		client:    d.Client,
		services:  core.Services().Lister(),
		pods:      core.Pods().Lister(),
		endpoints: core.Endpoints().Lister(),
		latency:   controller.NewChangeLatency[string](d.Metrics, "endpoints"),
		triggers:  endpointutil.NewTriggerTimes(),
		recorder:  events.NewRecorder(ctx, d.Client, ControllerName),
		replaced:  map[types.NamespacedName]string{},
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "endpoint", Sync: c.sync})
	queueNow := func(obj any) {
		if key, ok := informer.Key(obj); ok {
			c.latency.Seen(key)
			c.queue.Add(key)
		}
	}
	synced, err := informer.Register(
		informer.Handler{Informer: core.Services().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    queueNow,
			UpdateFunc: func(_, cur any) { queueNow(cur) },
			DeleteFunc: queueNow,
		}},
		informer.Handler{Informer: core.Pods().Informer(), Handler: endpointutil.PodEvents(c.services, func(key string) {
			c.latency.Seen(key)
			c.queue.AddAfter(key, c.opts.BatchPeriod)
		})},
		informer.Handler{Informer: core.Endpoints().Informer(), Handler: cache.ResourceEventHandlerFuncs{DeleteFunc: queueNow}},
	)
	if err != nil {
		return nil, fmt.Errorf("endpoints controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run syncs Services until ctx ends. It first queues every Endpoints this
// controller wrote, so that those whose Service went away while no
// controller ran are deleted.
func (c *Controller) Run(ctx context.Context) {
	if cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		written, _ := c.endpoints.List(labels.SelectorFromValidatedSet(labels.Set{LabelManagedBy: ControllerName}))
		for _, ep := range written {
			c.queue.Add(ep.Namespace + "/" + ep.Name)
		}
	}
	c.queue.Run(ctx, c.opts.Workers)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	return c.latency.Track(key, func() (bool, error) { return c.syncService(ctx, key) })
}

// syncService writes the Endpoints of one Service, or deletes them with it.
func (c *Controller) syncService(ctx context.Context, key string) (bool, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return false, fmt.Errorf("bad key %q: %w", key, err)
	}
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	svc, err := c.services.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.triggers.Forget(namespace, name)
		c.forgetReplaced(nn)
		err := c.client.CoreV1().Endpoints(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("delete endpoints %s: %w", key, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get service %s: %w", key, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return false, nil
	}
	pods, err := c.pods.Pods(namespace).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return false, fmt.Errorf("list pods of service %s: %w", key, err)
	}
	trigger := c.triggers.Compute(svc, pods)
	subsets := desiredSubsets(svc, pods)

	current, err := c.endpoints.Endpoints(namespace).Get(name)
	create := apierrors.IsNotFound(err)
	switch {
	case create:
		current = &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	case err != nil:
		return false, fmt.Errorf("get endpoints %s: %w", key, err)
	case c.isReplaced(nn, current.ResourceVersion):
		return false, fmt.Errorf("endpoints %w: resource version %s already replaced", controller.ErrStale, current.ResourceVersion)
	}
	if !create && upToDate(current, svc, subsets) {
		return false, nil
	}

	next := current.DeepCopy()
	next.Subsets = subsets
	next.Labels = endpointsLabels(svc)
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	endpointutil.SetTriggerTime(next.Annotations, trigger)
	if truncate(next) {
		next.Annotations[corev1.EndpointsOverCapacity] = "truncated"
	} else {
		delete(next.Annotations, corev1.EndpointsOverCapacity)
	}
	api := c.client.CoreV1().Endpoints(namespace)
	if create {
		_, err = api.Create(ctx, next, metav1.CreateOptions{})
	} else {
		var updated *corev1.Endpoints
		updated, err = api.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil && updated.ResourceVersion != current.ResourceVersion {
			c.markReplaced(nn, current.ResourceVersion)
		}
	}
	switch {
	case err == nil:
		return true, nil
	case create && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return false, nil // the namespace is going away with its Services
	case errors.Is(err, context.Canceled):
	case create:
		c.recorder.Eventf(next, corev1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %v/%v: %v", namespace, name, err)
	default:
		c.recorder.Eventf(next, corev1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %v/%v: %v", namespace, name, err)
	}
	return false, fmt.Errorf("write endpoints %s: %w", key, err)
}

// endpointsLabels are the Service's labels, the headless mark and the
// managed-by label.
func endpointsLabels(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Labels)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, corev1.IsHeadlessService)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		out[corev1.IsHeadlessService] = ""
	}
	out[LabelManagedBy] = ControllerName
	return out
}

// upToDate says whether the stored Endpoints already has the subsets (pod
// resourceVersions aside), labels and capacity annotation to be written.
func upToDate(current *corev1.Endpoints, svc *corev1.Service, subsets []corev1.EndpointSubset) bool {
	return maps.Equal(current.Labels, endpointsLabels(svc)) &&
		sameSubsets(current.Subsets, subsets) &&
		capacityAnnotated(current)
}

func (c *Controller) isReplaced(nn types.NamespacedName, rv string) bool {
	c.replacedMu.Lock()
	defer c.replacedMu.Unlock()
	return c.replaced[nn] == rv
}

func (c *Controller) markReplaced(nn types.NamespacedName, rv string) {
	c.replacedMu.Lock()
	defer c.replacedMu.Unlock()
	c.replaced[nn] = rv
}

func (c *Controller) forgetReplaced(nn types.NamespacedName) {
	c.replacedMu.Lock()
	defer c.replacedMu.Unlock()
	delete(c.replaced, nn)
}
