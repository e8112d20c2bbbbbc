// Package endpointslice is the EndpointSlice controller, as upstream's: it
// keeps, for every Service with a selector, discovery.k8s.io/v1
// EndpointSlices listing the selected pods (up to a maximum per slice, one
// address type per slice, grouped by how the Service's ports resolve on
// each pod) with their readiness, serving and terminating conditions,
// node, zone and hostname; it recreates slices deleted by others, and
// batches bursts of pod changes into one write per slice.
package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/endpointutil"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

const (
	// ControllerName is the managed-by label value of the slices this
	// controller owns.
	ControllerName = "endpointslice-controller.k8s.io"
	// component is the source of its Events.
	component = "endpoint-slice-controller"
	// sliceChangeDelay is the least time between a change to a slice by
	// someone else and the sync that repairs it, so that several such
	// changes give one sync.
	sliceChangeDelay = time.Second
)

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-service-endpoint-syncs.
	Workers int
	// MaxEndpointsPerSlice is --max-endpoints-per-slice.
	MaxEndpointsPerSlice int
	// BatchPeriod is --endpointslice-updates-batch-period: pod changes
	// wait this long, so that a burst of them gives one write.
	BatchPeriod time.Duration
}

// Controller is the EndpointSlice controller.
type Controller struct {
	opts     Options
	client   kubernetes.Interface
	services corelisters.ServiceLister
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	synced   []cache.InformerSynced
	queue    *controller.Queue[string]
	latency  *controller.ChangeLatency[string]
	tracker  *endpointutil.SliceTracker
	triggers *endpointutil.TriggerTimes
	recorder record.EventRecorder
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	core := d.Informers.Core().V1()
	sliceInformer := d.Informers.Discovery().V1().EndpointSlices()
	c := &Controller{
		opts:     opts,
		client:   d.Client,
		services: core.Services().Lister(),
		pods:     core.Pods().Lister(),
		nodes:    core.Nodes().Lister(),
		slices:   sliceInformer.Lister(),
		latency:  controller.NewChangeLatency[string](d.Metrics, "endpointslice"),
		tracker:  endpointutil.NewSliceTracker(),
		triggers: endpointutil.NewTriggerTimes(),
		recorder: events.NewRecorder(ctx, d.Client, component),
	}
	// A failing Service waits 1s, doubling to 1000s: its writes can be
	// large, and the API server should not be hammered.
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{
		Name: "endpoint_slice",
		RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 1000*time.Second),
			&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
		),
		Sync: c.sync,
	})
	synced, err := informer.Register(
		informer.Handler{Informer: core.Services().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onService,
			UpdateFunc: func(_, cur any) { c.onService(cur) },
			DeleteFunc: c.onService,
		}},
		informer.Handler{Informer: core.Pods().Informer(), Handler: endpointutil.PodEvents(c.services, func(key string) {
			c.latency.Seen(key)
			c.queue.AddAfter(key, c.opts.BatchPeriod)
		})},
		informer.Handler{Informer: core.Nodes().Informer(), Handler: cache.ResourceEventHandlerFuncs{}},
		informer.Handler{Informer: sliceInformer.Informer(), Handler: endpointutil.SliceEvents(ControllerName, c.tracker, func(key string) {
			c.latency.Seen(key)
			c.queue.AddAfter(key, max(sliceChangeDelay, c.opts.BatchPeriod))
		})},
	)
	if err != nil {
		return nil, fmt.Errorf("endpointslice controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run syncs Services until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

func (c *Controller) onService(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.latency.Seen(key)
		c.queue.Add(key)
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	return c.latency.Track(key, func() (bool, error) { return c.syncService(ctx, key) })
}

// syncService brings the slices of one Service in line with its pods.
func (c *Controller) syncService(ctx context.Context, key string) (bool, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return false, fmt.Errorf("bad key %q: %w", key, err)
	}
	svc, err := c.services.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// The garbage collector deletes the slices with the Service.
		c.triggers.Forget(namespace, name)
		c.tracker.Forget(namespace, name)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get service %s: %w", key, err)
	}
	// ExternalName Services have no endpoints; selector-less ones get
	// theirs from their users (and the mirroring controller).
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return false, nil
	}
	pods, err := c.pods.Pods(namespace).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return false, fmt.Errorf("list pods of service %s: %w", key, err)
	}
	selector := labels.SelectorFromValidatedSet(labels.Set{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ControllerName})
	cached, err := c.slices.EndpointSlices(namespace).List(selector)
	if err != nil {
		return false, fmt.Errorf("list endpoint slices of service %s: %w", key, err)
	}
	var existing []*discoveryv1.EndpointSlice
	for _, s := range cached {
		if s.DeletionTimestamp == nil {
			existing = append(existing, s)
		}
	}
	if c.tracker.Stale(namespace, name, svc.UID, existing) {
		return false, fmt.Errorf("EndpointSlice %w", controller.ErrStale)
	}
	// Computed on every sync, so that a sync without writes still moves
	// the trigger times forward.
	trigger := c.triggers.Compute(svc, pods)
	wrote, err := c.reconcile(ctx, svc, pods, existing, trigger)
	if err != nil && !errors.Is(err, context.Canceled) {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", namespace, name, err)
	}
	return wrote, err
}
