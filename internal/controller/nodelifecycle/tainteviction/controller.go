// Package tainteviction is upstream's taint-eviction-controller: it deletes
// the pods on a node with NoExecute taints they do not tolerate, at once,
// or once the shortest tolerationSeconds of the tolerations in use has
// passed; a scheduled deletion is cancelled when the taint goes away, the
// pod comes to tolerate it forever, or the pod is gone. This is how pods
// leave a node that the node lifecycle controller found not-ready or
// unreachable (taint-based eviction).
package tainteviction

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is the controller's name in --controllers and the source
// of its events.
const ControllerName = "taint-eviction-controller"

// deleteRetries is how often one deletion is tried before it waits for
// the pod's or the node's next change, as upstream.
const deleteRetries = 5

// Options configure the controller.
type Options struct {
	// Clock times the evictions; nil is the real clock (tests pass a
	// fake one).
	Clock clock.WithDelayedExecution
}

// Controller is the taint eviction controller.
type Controller struct {
	client    kubernetes.Interface
	clock     clock.WithDelayedExecution
	recorder  record.EventRecorder
	pods      corelisters.PodLister
	nodes     corelisters.NodeLister
	podsOn    func(node string) ([]*corev1.Pod, error)
	synced    []cache.InformerSynced
	nodeQueue *controller.Queue[string]
	podQueue  *controller.Queue[podItem]
	// due holds the pods whose deletion time has come.
	due *controller.Queue[types.NamespacedName]

	// mu guards tainted (each node's NoExecute taints, as last seen by
	// a node sync) and evictions.
	mu        sync.Mutex
	tainted   map[string][]corev1.Taint
	evictions map[types.NamespacedName]*eviction
}

// podItem is a pod and the node it was seen on.
type podItem struct {
	pod  types.NamespacedName
	node string
}

// eviction is one pod's scheduled deletion. Its record stays once the
// deletion is done, so that the pod is not deleted twice.
type eviction struct {
	createdAt time.Time
	timer     clock.Timer
	// fired is set when the timer has gone off, done once the pod is
	// deleted.
	fired, done bool
}

// New creates the controller and registers its informer handlers; its
// events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	core := d.Informers.Core().V1()
	podsOn, err := PodsByNode(core.Pods().Informer())
	if err != nil {
		return nil, fmt.Errorf("taint eviction controller: %w", err)
	}
	c := &Controller{
		client:    d.Client,
		clock:     opts.Clock,
		recorder:  events.NewRecorder(ctx, d.Client, ControllerName),
		pods:      core.Pods().Lister(),
		nodes:     core.Nodes().Lister(),
		podsOn:    podsOn,
		tainted:   map[string][]corev1.Taint{},
		evictions: map[types.NamespacedName]*eviction{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.nodeQueue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "noexec_taint_node", Sync: c.syncNode})
	c.podQueue = controller.NewQueue(d.Metrics, controller.QueueConfig[podItem]{Name: "noexec_taint_pod", Sync: c.syncPod})
	c.due = controller.NewQueue(d.Metrics, controller.QueueConfig[types.NamespacedName]{Name: "noexec_taint_eviction", Sync: c.evict})
	c.synced, err = informer.Register(
		informer.Handler{Informer: core.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.podChanged(nil, obj) },
			UpdateFunc: c.podChanged,
			DeleteFunc: func(obj any) { c.podChanged(obj, nil) },
		}},
		informer.Handler{Informer: core.Nodes().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.nodeChanged(nil, obj) },
			UpdateFunc: c.nodeChanged,
			DeleteFunc: func(obj any) { c.nodeChanged(obj, nil) },
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("taint eviction controller: %w", err)
	}
	return c, nil
}

// Run handles node and pod changes until ctx ends; pending evictions are
// then dropped (the next leader schedules them anew).
func (c *Controller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	// Upstream runs 8 workers, each owning the pods of its nodes.
	wg.Go(func() { c.nodeQueue.Run(ctx, 8, c.synced...) })
	wg.Go(func() { c.podQueue.Run(ctx, 8, c.synced...) })
	wg.Go(func() { c.due.Run(ctx, 4) })
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.evictions {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	clear(c.evictions)
}

// podChanged queues a pod whose node or tolerations changed, or that came
// or went.
func (c *Controller) podChanged(oldObj, newObj any) {
	oldPod, _ := informer.Object[*corev1.Pod](oldObj)
	newPod, _ := informer.Object[*corev1.Pod](newObj)
	pod := newPod
	if pod == nil {
		pod = oldPod
	}
	if pod == nil {
		return
	}
	if oldPod != nil && newPod != nil && oldPod.Spec.NodeName == newPod.Spec.NodeName &&
		apiequality.Semantic.DeepEqual(oldPod.Spec.Tolerations, newPod.Spec.Tolerations) {
		return
	}
	c.podQueue.Add(podItem{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, node: pod.Spec.NodeName})
}

// nodeChanged queues a node whose NoExecute taints changed, or that came
// or went.
func (c *Controller) nodeChanged(oldObj, newObj any) {
	oldNode, _ := informer.Object[*corev1.Node](oldObj)
	newNode, _ := informer.Object[*corev1.Node](newObj)
	if oldNode != nil && newNode != nil &&
		apiequality.Semantic.DeepEqual(noExecuteTaints(oldNode.Spec.Taints), noExecuteTaints(newNode.Spec.Taints)) {
		return
	}
	if newNode != nil {
		c.nodeQueue.Add(newNode.Name)
	} else if oldNode != nil {
		c.nodeQueue.Add(oldNode.Name)
	}
}

// syncNode records a node's NoExecute taints and reconsiders its pods.
func (c *Controller) syncNode(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.tainted, name)
		c.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	taints := noExecuteTaints(node.Spec.Taints)
	c.mu.Lock()
	if len(taints) == 0 {
		delete(c.tainted, name)
	} else {
		c.tainted[name] = taints
	}
	c.mu.Unlock()
	// The taints are recorded before the pods are listed: a pod that
	// arrives later is handled by its own sync.
	pods, err := c.podsOn(name)
	if err != nil {
		return fmt.Errorf("pods on node %s: %w", name, err)
	}
	now := c.clock.Now()
	for _, pod := range pods {
		c.consider(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, pod.Spec.Tolerations, taints, now)
	}
	return nil
}

// syncPod reconsiders one pod against its node's taints.
func (c *Controller) syncPod(ctx context.Context, item podItem) error {
	pod, err := c.pods.Pods(item.pod.Namespace).Get(item.pod.Name)
	if apierrors.IsNotFound(err) {
		c.cancel(item.pod)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s: %w", item.pod, err)
	}
	if pod.Spec.NodeName != item.node || pod.Spec.NodeName == "" {
		return nil // a newer item for the pod's current node follows
	}
	c.mu.Lock()
	taints, ok := c.tainted[pod.Spec.NodeName]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	c.consider(item.pod, pod.Spec.Tolerations, taints, c.clock.Now())
	return nil
}

// consider schedules, keeps, moves or cancels a pod's deletion for the
// NoExecute taints of its node, as upstream's processPodOnNode.
func (c *Controller) consider(pod types.NamespacedName, tolerations []corev1.Toleration, taints []corev1.Taint, now time.Time) {
	if len(taints) == 0 {
		c.cancel(pod)
		return
	}
	used, all := matchingTolerations(taints, tolerations)
	if !all {
		c.cancel(pod)
		c.schedule(pod, now, now)
		return
	}
	wait := minTolerationTime(used)
	if wait < 0 {
		c.cancel(pod) // tolerated forever
		return
	}
	c.mu.Lock()
	e := c.evictions[pod]
	pending := e != nil && !e.fired
	c.mu.Unlock()
	if pending {
		if e.createdAt.Before(now) {
			return // as upstream, an earlier schedule stands
		}
		c.cancel(pod)
	}
	c.schedule(pod, now, now.Add(wait))
}

// schedule deletes pod at fireAt, unless a deletion is already scheduled
// or done; a deletion that fired but failed is tried again.
func (c *Controller) schedule(pod types.NamespacedName, createdAt, fireAt time.Time) {
	delay := fireAt.Sub(c.clock.Now())
	c.mu.Lock()
	if e, ok := c.evictions[pod]; ok {
		if e.fired && !e.done {
			c.due.Add(pod)
		}
		c.mu.Unlock()
		return
	}
	e := &eviction{createdAt: createdAt, fired: delay <= 0}
	c.evictions[pod] = e
	c.mu.Unlock()
	if e.fired {
		c.due.Add(pod)
		return
	}
	// The clock is not called under mu: a fake clock runs the callback
	// while holding its own lock.
	timer := c.clock.AfterFunc(delay, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.evictions[pod] == e {
			e.fired = true
			c.due.Add(pod)
		}
	})
	c.mu.Lock()
	e.timer = timer
	c.mu.Unlock()
}

// cancel drops a pod's scheduled deletion, with upstream's event when one
// was pending.
func (c *Controller) cancel(pod types.NamespacedName) {
	c.mu.Lock()
	e, ok := c.evictions[pod]
	delete(c.evictions, pod)
	pending := ok && !e.fired && e.timer != nil
	c.mu.Unlock()
	if pending && e.timer.Stop() {
		c.recorder.Eventf(podRef(pod), corev1.EventTypeNormal, "TaintManagerEviction", "Cancelling deletion of Pod %s", pod)
	}
}

// evict deletes a pod whose deletion time has come, unless the deletion
// was cancelled meanwhile or is done.
func (c *Controller) evict(ctx context.Context, pod types.NamespacedName) error {
	c.mu.Lock()
	e := c.evictions[pod]
	due := e != nil && e.fired && !e.done
	c.mu.Unlock()
	if !due {
		return nil
	}
	slog.Info("deleting pod for a NoExecute taint", "controller", ControllerName, "pod", pod.String())
	c.recorder.Eventf(podRef(pod), corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s", pod)
	var err error
	for range deleteRetries {
		if err = c.deletePod(ctx, pod); err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.mu.Lock()
	e.done = true
	c.mu.Unlock()
	return nil
}

// deletePod marks the pod as a disruption target, as upstream, and
// deletes it.
func (c *Controller) deletePod(ctx context.Context, name types.NamespacedName) error {
	pods := c.client.CoreV1().Pods(name.Namespace)
	pod, err := pods.Get(ctx, name.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get pod %s: %w", name, err)
	}
	if setDisruptionTarget(pod, c.clock.Now()) {
		if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update status of pod %s: %w", name, err)
		}
	}
	if err := pods.Delete(ctx, name.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}); err != nil {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}

// setDisruptionTarget sets upstream's DisruptionTarget condition of a
// pod deleted for a taint; it returns whether the status changed.
func setDisruptionTarget(pod *corev1.Pod, now time.Time) bool {
	want := corev1.PodCondition{
		Type:    corev1.DisruptionTarget,
		Status:  corev1.ConditionTrue,
		Reason:  "DeletionByTaintManager",
		Message: "Taint manager: deleting due to NoExecute taint",
	}
	for i, cond := range pod.Status.Conditions {
		if cond.Type != want.Type {
			continue
		}
		if cond.Status == want.Status && cond.Reason == want.Reason && cond.Message == want.Message {
			return false
		}
		want.LastTransitionTime = cond.LastTransitionTime
		if cond.Status != want.Status {
			want.LastTransitionTime = metav1.NewTime(now)
		}
		pod.Status.Conditions[i] = want
		return true
	}
	want.LastTransitionTime = metav1.NewTime(now)
	pod.Status.Conditions = append(pod.Status.Conditions, want)
	return true
}

func podRef(pod types.NamespacedName) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}
}

func noExecuteTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// matchingTolerations returns, for each taint, a toleration that
// tolerates it, and whether every taint is tolerated.
func matchingTolerations(taints []corev1.Taint, tolerations []corev1.Toleration) ([]corev1.Toleration, bool) {
	var used []corev1.Toleration
	for i := range taints {
		tolerated := false
		for j := range tolerations {
			// Validation admits no Lt/Gt operators, so comparisons stay off.
			if tolerations[j].ToleratesTaint(klog.Background(), &taints[i], false) {
				used = append(used, tolerations[j])
				tolerated = true
				break
			}
		}
		if !tolerated {
			return nil, false
		}
	}
	return used, true
}

// minTolerationTime is the shortest tolerationSeconds among tolerations,
// 0 when one is not positive or there are none, and -1 for forever.
func minTolerationTime(tolerations []corev1.Toleration) time.Duration {
	if len(tolerations) == 0 {
		return 0
	}
	least := int64(math.MaxInt64)
	for _, t := range tolerations {
		if t.TolerationSeconds == nil {
			continue
		}
		if *t.TolerationSeconds <= 0 {
			return 0
		}
		least = min(least, *t.TolerationSeconds)
	}
	if least == math.MaxInt64 {
		return -1
	}
	return time.Duration(least) * time.Second
}
