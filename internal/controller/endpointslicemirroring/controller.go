// Package endpointslicemirroring is the EndpointSlice mirroring controller,
// as upstream's: for a Service without a selector, whose users write its
// v1 Endpoints by hand, it mirrors those Endpoints into EndpointSlices, so
// that everything reading slices (kube-proxy, DNS, kubectl describe) sees
// them. Endpoints labelled endpointslice.kubernetes.io/skip-mirror=true, or
// carrying a leader-election record, are not mirrored.
package endpointslicemirroring

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/endpointutil"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

const (
	// ControllerName is the managed-by label value of mirrored slices.
	ControllerName = "endpointslicemirroring-controller.k8s.io"
	// component is the source of its Events.
	component = "endpoint-slice-mirroring-controller"
)

// Options are the controller's flags.
type Options struct {
	// Workers is --mirroring-concurrent-service-endpoint-syncs.
	Workers int
	// MaxEndpointsPerSubset is --mirroring-max-endpoints-per-subset: the
	// rest of a larger subset is not mirrored.
	MaxEndpointsPerSubset int
	// BatchPeriod is --mirroring-endpointslice-updates-batch-period.
	BatchPeriod time.Duration
}

// Controller is the mirroring controller.
type Controller struct {
	opts      Options
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	endpoints corelisters.EndpointsLister
	slices    discoverylisters.EndpointSliceLister
	synced    []cache.InformerSynced
	queue     *controller.Queue[string]
	latency   *controller.ChangeLatency[string]
	tracker   *endpointutil.SliceTracker
	recorder  record.EventRecorder
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	core := d.Informers.Core().V1()
	sliceInformer := d.Informers.Discovery().V1().EndpointSlices()
	c := &Controller{
		opts:      opts,
		client:    d.Client,
		services:  core.Services().Lister(),
		endpoints: core.Endpoints().Lister(),
		slices:    sliceInformer.Lister(),
		latency:   controller.NewChangeLatency[string](d.Metrics, "endpointslicemirroring"),
		tracker:   endpointutil.NewSliceTracker(),
		recorder:  events.NewRecorder(ctx, d.Client, component),
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "endpoint_slice_mirroring", Sync: c.sync})
	synced, err := informer.Register(
		informer.Handler{Informer: core.Endpoints().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { c.onEndpoints(nil, obj) },
			UpdateFunc: func(old, cur any) {
				c.onEndpoints(old, cur)
			},
			DeleteFunc: func(obj any) { c.onEndpoints(nil, obj) },
		}},
		informer.Handler{Informer: core.Services().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: c.onSelectorless,
			UpdateFunc: func(old, cur any) {
				// Gaining or losing a selector starts or ends mirroring.
				o, ok1 := old.(*corev1.Service)
				n, ok2 := cur.(*corev1.Service)
				if ok1 && ok2 && (o.Spec.Selector == nil) != (n.Spec.Selector == nil) {
					c.enqueue(cur)
				}
			},
			DeleteFunc: c.onSelectorless,
		}},
		informer.Handler{Informer: sliceInformer.Informer(), Handler: endpointutil.SliceEvents(ControllerName, c.tracker, func(key string) {
			c.latency.Seen(key)
			c.queue.AddAfter(key, c.opts.BatchPeriod)
		})},
	)
	if err != nil {
		return nil, fmt.Errorf("endpointslice mirroring controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run mirrors Endpoints until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

// mirrored says whether Endpoints may be mirrored at all.
func mirrored(ep *corev1.Endpoints) bool {
	if ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, leader := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !leader
}

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.latency.Seen(key)
		c.queue.Add(key)
	}
}

// onEndpoints queues Endpoints that are, or were, mirrored.
func (c *Controller) onEndpoints(old, cur any) {
	ep, ok := informer.Object[*corev1.Endpoints](cur)
	if !ok {
		return
	}
	prev, hadPrev := old.(*corev1.Endpoints)
	if mirrored(ep) || (hadPrev && mirrored(prev)) {
		c.enqueue(cur)
	}
}

func (c *Controller) onSelectorless(obj any) {
	if svc, ok := informer.Object[*corev1.Service](obj); ok && svc.Spec.Selector == nil {
		c.enqueue(obj)
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	return c.latency.Track(key, func() (bool, error) { return c.syncEndpoints(ctx, key) })
}

// syncEndpoints mirrors one Endpoints object, or removes its mirror when
// it, its selector-less Service, or its eligibility is gone.
func (c *Controller) syncEndpoints(ctx context.Context, key string) (bool, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return false, fmt.Errorf("bad key %q: %w", key, err)
	}
	ep, err := c.endpoints.Endpoints(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("get endpoints %s: %w", key, err)
	}
	mirror := err == nil && mirrored(ep)
	if mirror {
		svc, err := c.services.Services(namespace).Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("get service %s: %w", key, err)
		}
		mirror = err == nil && svc.Spec.Selector == nil
	}
	existing, err := c.slices.EndpointSlices(namespace).List(labels.SelectorFromValidatedSet(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ControllerName,
	}))
	if err != nil {
		return false, fmt.Errorf("list mirrored slices of %s: %w", key, err)
	}
	if !mirror {
		c.tracker.Forget(namespace, name)
		return c.writer(ep, key).Apply(ctx, namespace, endpointutil.SliceWrites{Delete: existing})
	}
	if c.tracker.Stale(namespace, name, ep.UID, existing) {
		return false, fmt.Errorf("EndpointSlice %w", controller.ErrStale)
	}
	return c.reconcile(ctx, ep, existing)
}
