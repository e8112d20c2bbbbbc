// Package nodelifecycle is upstream's node-lifecycle-controller. Every
// monitor period it checks that each node's agent is alive — its Lease in
// kube-node-lease renewed, or its Ready condition's heartbeat — and marks
// a node silent for longer than the grace period Unknown
// ("Kubelet stopped posting node status."), its pods not Ready so that
// they leave Services. It taints nodes by condition: NoSchedule taints for
// the scheduler (TaintNodesByCondition, spec.unschedulable) and the
// NoExecute not-ready/unreachable taints that the taint eviction
// controller acts on, added at a rate limited per zone and not at all
// while every node is down, as upstream.
package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/nodelifecycle/tainteviction"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is the source of the controller's events, upstream's.
const ControllerName = "node-controller"

// evictionPeriod is how often the NoExecute tainting queues are served.
const evictionPeriod = 100 * time.Millisecond

// Options are the controller's flags.
type Options struct {
	// MonitorPeriod is --node-monitor-period: how often node health is
	// checked.
	MonitorPeriod time.Duration
	// GracePeriod is --node-monitor-grace-period: how long a node that
	// has reported may stay silent before it is Unknown.
	GracePeriod time.Duration
	// StartupGracePeriod is --node-startup-grace-period: the same for a
	// node that never reported its status.
	StartupGracePeriod time.Duration
	// EvictionRate is --node-eviction-rate: nodes per second tainted
	// NoExecute in a healthy zone.
	EvictionRate float32
	// SecondaryRate is --secondary-node-eviction-rate: the same in an
	// unhealthy zone of more than LargeCluster nodes (else 0).
	SecondaryRate float32
	// LargeCluster is --large-cluster-size-threshold.
	LargeCluster int32
	// UnhealthyZone is --unhealthy-zone-threshold: the share of not
	// Ready nodes (at least 3) that makes a zone unhealthy.
	UnhealthyZone float32
	// Clock is nil for the real clock; tests pass a fake one.
	Clock clock.WithTicker
}

// Controller is the node lifecycle controller.
type Controller struct {
	opts     Options
	clock    clock.WithTicker
	client   kubernetes.Interface
	recorder record.EventRecorder
	nodes    corelisters.NodeLister
	leases   coordlisters.LeaseLister
	pods     corelisters.PodLister
	podsOn   func(node string) ([]*corev1.Pod, error)
	synced   []cache.InformerSynced
	// nodeQueue keeps NoSchedule taints and labels; podQueue marks pods
	// newly assigned to a not-Ready node not Ready.
	nodeQueue *controller.Queue[string]
	podQueue  *controller.Queue[string]

	// healthMu guards health and retry.
	healthMu sync.Mutex
	health   map[string]*nodeHealth
	// retry holds nodes whose pods still need to be marked not Ready.
	retry map[string]bool

	// known is the nodes seen by the last monitor pass; only the
	// monitor loop uses it.
	known map[string]bool

	// zoneMu guards zones and tainters.
	zoneMu   sync.Mutex
	zones    map[string]zoneState
	tainters map[string]*tainter
}

// New creates the controller and registers its informer handlers; its
// events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	core := d.Informers.Core().V1()
	leases := d.Informers.Coordination().V1().Leases()
	podsOn, err := tainteviction.PodsByNode(core.Pods().Informer())
	if err != nil {
		return nil, fmt.Errorf("node lifecycle controller: %w", err)
	}
	c := &Controller{
		opts:     opts,
		clock:    opts.Clock,
		client:   d.Client,
		recorder: events.NewRecorder(ctx, d.Client, ControllerName),
		nodes:    core.Nodes().Lister(),
		leases:   leases.Lister(),
		pods:     core.Pods().Lister(),
		podsOn:   podsOn,
		health:   map[string]*nodeHealth{},
		retry:    map[string]bool{},
		known:    map[string]bool{},
		zones:    map[string]zoneState{},
		tainters: map[string]*tainter{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.nodeQueue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "node_lifecycle_controller", Sync: c.syncNode})
	c.podQueue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "node_lifecycle_controller_pods", Sync: c.syncPod})
	queueNode := func(obj any) {
		if n, ok := informer.Object[*corev1.Node](obj); ok {
			c.nodeQueue.Add(n.Name)
		}
	}
	c.synced, err = informer.Register(
		informer.Handler{Informer: core.Nodes().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    queueNode,
			UpdateFunc: func(_, cur any) { queueNode(cur) },
		}},
		informer.Handler{Informer: core.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.podAssigned(nil, obj) },
			UpdateFunc: c.podAssigned,
		}},
		informer.Handler{Informer: leases.Informer(), Handler: cache.ResourceEventHandlerFuncs{}},
	)
	if err != nil {
		return nil, fmt.Errorf("node lifecycle controller: %w", err)
	}
	return c, nil
}

// Run monitors node health and keeps taints until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.nodeQueue.Run(ctx, 8) })
	wg.Go(func() { c.podQueue.Run(ctx, 4) })
	wg.Go(func() { c.every(ctx, evictionPeriod, c.noExecuteTaintingPass) })
	wg.Go(func() {
		c.every(ctx, c.opts.MonitorPeriod, func(ctx context.Context) {
			if err := c.monitor(ctx); err != nil && ctx.Err() == nil {
				slog.Error("monitor node health", "err", err)
			}
		})
	})
	wg.Wait()
}

// every runs f now and then each period until ctx ends.
func (c *Controller) every(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := c.clock.NewTicker(period)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// podAssigned queues a pod that was just assigned to a node.
func (c *Controller) podAssigned(oldObj, newObj any) {
	pod, ok := informer.Object[*corev1.Pod](newObj)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	if old, ok := informer.Object[*corev1.Pod](oldObj); ok && old.Spec.NodeName == pod.Spec.NodeName {
		return
	}
	if key, ok := informer.Key(pod); ok {
		c.podQueue.Add(key)
	}
}

// syncPod marks a pod not Ready when the node it was assigned to is not
// Ready, as last seen by the monitor.
func (c *Controller) syncPod(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	pod, err := c.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s: %w", key, err)
	}
	c.healthMu.Lock()
	h := c.health[pod.Spec.NodeName]
	var ready *corev1.NodeCondition
	if h != nil {
		ready = readyCondition(h.status).DeepCopy()
	}
	c.healthMu.Unlock()
	if h == nil {
		return nil // not monitored yet, or gone
	}
	if _, err := c.nodes.Get(pod.Spec.NodeName); err != nil {
		return fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	if ready == nil || ready.Status == corev1.ConditionTrue {
		return nil
	}
	return c.markPodsNotReady(ctx, []*corev1.Pod{pod}, pod.Spec.NodeName)
}

func (c *Controller) tainterOf(node *corev1.Node) *tainter {
	c.zoneMu.Lock()
	defer c.zoneMu.Unlock()
	return c.tainterLocked(zoneKey(node))
}

// tainterLocked is the zone's tainter, created for a new zone.
func (c *Controller) tainterLocked(zone string) *tainter {
	t, ok := c.tainters[zone]
	if !ok {
		c.zones[zone] = stateInitial
		t = newTainter(c.clock, c.opts.EvictionRate)
		c.tainters[zone] = t
	}
	return t
}

// nodeEvent records an event about a node as upstream's RecordNodeEvent.
func (c *Controller) nodeEvent(node *corev1.Node, reason, msg string) {
	c.recorder.Eventf(nodeRef(node), corev1.EventTypeNormal, reason, "Node %s event: %s", node.Name, msg)
}

func nodeRef(node *corev1.Node) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
}

func readyCondition(st *corev1.NodeStatus) *corev1.NodeCondition {
	return condition(st, corev1.NodeReady)
}

func condition(st *corev1.NodeStatus, t corev1.NodeConditionType) *corev1.NodeCondition {
	if st == nil {
		return nil
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}
